/*
 * demo_frontend.h - the checkout of traceprof-demo-frontend: a little CPU
 * of its own, then a blocking call to the payment service
 * (traceprof-demo-service, POST /api/pay) that carries the frontend's span
 * in traceparent, so both services' spans and samples share one trace.
 */
#ifndef TRACEPROF_DEMO_FRONTEND_H
#define TRACEPROF_DEMO_FRONTEND_H

/*
 * Makes POST /api/checkout call the payment service at payment
 * ("HOST:PORT", an IPv4 address or a name) and stops serving /api/pay.
 * Call once before serving. Returns 0, or -EINVAL after logging what was
 * wrong with payment.
 */
int demo_frontend_init(const char *payment);

#endif
