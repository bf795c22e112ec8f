/* triggers_control.c - see triggers_control.h. */
#include "triggers_control.h"

static int apply(void *ctx, const Traceprof__Control__V1__ApplyTriggersRequest *req, bool *changed,
		 uint64_t *fence)
{
	return triggers_apply(ctx, req, changed, fence);
}

static uint64_t generation(void *ctx)
{
	return triggers_generation(ctx);
}

static Traceprof__Control__V1__TriggerStatus **status(void *ctx, size_t *n)
{
	return triggers_status(ctx, n);
}

static void sampler_health(void *ctx, Traceprof__Control__V1__SamplerHealth *out)
{
	triggers_sampler_health(ctx, out);
}

void triggers_control_engine(struct triggers *t, struct control_engine *out)
{
	*out = (struct control_engine){
	    .ctx = t,
	    .apply = apply,
	    .generation = generation,
	    .status = status,
	    .status_free = triggers_status_free,
	    .sampler_health = sampler_health,
	};
}
