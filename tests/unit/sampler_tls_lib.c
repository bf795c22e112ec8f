/*
 * sampler_tls_lib.c - a shared library with one TLS pointer, loaded with
 * dlopen by test_sampler: its variable lives in a dynamically allocated TLS
 * block, reached through the thread's DTV (the TP_TLS_DTV path).
 */
__attribute__((visibility("default"))) void **sampler_tls_lib_slot(void);

static __thread void *lib_ctx; /* stands for otel_thread_ctx_v1 in a library */

/* Address of the calling thread's variable (allocates its TLS block). */
void **sampler_tls_lib_slot(void)
{
	return &lib_ctx;
}
