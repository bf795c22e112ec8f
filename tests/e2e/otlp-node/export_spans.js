// Exports known spans to an OTLP/gRPC endpoint with the OpenTelemetry JS
// SDK and prints what it sent as CSV (the ground truth the e2e test checks
// the database against): one line per SERVER span; the CLIENT span it also
// sends is not printed, since it must not become a request row.
// usage: node export_spans.js http://127.0.0.1:PORT
'use strict';

const api = require('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const sc = require('@opentelemetry/semantic-conventions');

const url = process.argv[2];
if (!url) {
  console.error('usage: node export_spans.js http://HOST:PORT');
  process.exit(2);
}

// Every export's result; the program fails if any export failed.
const failures = [];
const exporter = new OTLPTraceExporter({ url, timeoutMillis: 10000 });
const recording = {
  export(spans, done) {
    exporter.export(spans, (result) => {
      if (result.code !== 0) failures.push(result.error ? String(result.error) : 'failed');
      done(result);
    });
  },
  shutdown: () => exporter.shutdown(),
  forceFlush: () => exporter.forceFlush(),
};

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({
    [sc.ATTR_SERVICE_NAME]: 'node-e2e',
    'k8s.namespace.name': 'shop',
    'k8s.pod.name': 'node-e2e-0',
    'host.name': 'e2e-host',
  }),
  spanProcessors: [new SimpleSpanProcessor(recording)],
});
const tracer = provider.getTracer('traceprof-e2e');

// [seconds, nanoseconds] at a whole microsecond, a minute ago plus an offset.
const base = Math.floor(Date.now() / 1000) - 60;
const at = (ms, us) => [base + Math.floor(ms / 1000), (ms % 1000) * 1e6 + us * 1e3];

const cases = [
  // route, method, status, start ms, start extra us, duration us, new conventions?
  ['/cart/{id}', 'POST', 201, 0, 7, 2500, true],
  ['/items', 'GET', 200, 100, 0, 800, true],
  ['/checkout', 'POST', 503, 200, 123, 1234567, true],
  ['/health', 'GET', 204, 300, 999, 1, true],
  ['/legacy?page=2', 'PUT', 404, 400, 5, 42000, false],
];

const remoteParent = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: api.TraceFlags.SAMPLED,
  isRemote: true,
};

const lines = ['trace_id,span_id,parent_span_id,route,method,status,start_us,duration_us'];
cases.forEach(([route, method, status, ms, us, dur, current], i) => {
  const start = at(ms, us);
  const end = [start[0] + Math.floor((start[1] + dur * 1000) / 1e9), (start[1] + dur * 1000) % 1e9];
  const attributes = current
    ? {
        [sc.ATTR_HTTP_ROUTE]: route,
        [sc.ATTR_HTTP_REQUEST_METHOD]: method,
        [sc.ATTR_HTTP_RESPONSE_STATUS_CODE]: status,
      }
    : { 'http.target': route, 'http.method': method, 'http.status_code': String(status) };
  // the second span continues a trace from an upstream service
  const ctx = i === 1 ? api.trace.setSpanContext(api.context.active(), remoteParent) : api.ROOT_CONTEXT;
  const span = tracer.startSpan(`${method} ${route}`, { kind: api.SpanKind.SERVER, startTime: start, attributes }, ctx);
  const sctx = span.spanContext();
  if (i === 0) {
    // an outgoing call inside the first request: a CLIENT span, not a request
    const child = tracer.startSpan('GET upstream', {
      kind: api.SpanKind.CLIENT,
      startTime: at(ms, us + 10),
      attributes: { [sc.ATTR_HTTP_REQUEST_METHOD]: 'GET', [sc.ATTR_HTTP_RESPONSE_STATUS_CODE]: 200 },
    }, api.trace.setSpan(api.context.active(), span));
    child.end(at(ms, us + 20));
  }
  span.end(end);
  lines.push([sctx.traceId, sctx.spanId, i === 1 ? remoteParent.spanId : '', route, method, status,
    start[0] * 1e6 + start[1] / 1e3, dur].join(','));
});

provider.forceFlush()
  .then(() => provider.shutdown())
  .then(() => {
    if (failures.length) {
      console.error(`export failed: ${failures.join('; ')}`);
      process.exit(1);
    }
    console.log(lines.join('\n'));
  })
  .catch((e) => {
    console.error(`export failed: ${e}`);
    process.exit(1);
  });
