/*
 * tlsloc_dso.c - a shared library that defines otel_thread_ctx_v1, for
 * tlsloc_writer built with WRITER_DLOPEN (dlopen'ed after start). Built
 * with the traditional global-dynamic model and with TLS descriptors.
 */
__thread void *otel_thread_ctx_v1 __attribute__((visibility("default")));

void **tlsloc_dso_slot(void);

/* The calling thread's otel_thread_ctx_v1 (allocates its block on first use). */
void **tlsloc_dso_slot(void)
{
	return &otel_thread_ctx_v1;
}
