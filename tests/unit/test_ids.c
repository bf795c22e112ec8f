/* test_ids: dictionary ids are stable, distinct, never 0; id text forms round-trip. */
#include <string.h>

#include "check.h"
#include "traceprof/ids.h"

int main(void)
{
	uint8_t tid[16];
	char text[33];
	char stext[17];
	uint64_t span;
	uint64_t frames_a[] = {1, 2, 3};
	uint64_t frames_b[] = {1, 3, 2};

	CHECK(ids_function("libc.so.6", "memcpy") == ids_function("libc.so.6", "memcpy"),
	      "deterministic");
	CHECK(ids_function("ab", "c") != ids_function("a", "bc"), "length-prefixed fields");
	CHECK(ids_function(NULL, "x") == ids_function("", "x"), "NULL is the empty string");
	CHECK(ids_stack(frames_a, 3) != ids_stack(frames_b, 3), "order matters in stacks");
	CHECK(ids_stack(frames_a, 2) != ids_stack(frames_a, 3), "length matters in stacks");
	CHECK(ids_route("GET", "/a") != ids_source("GET", "/a", "", "", "", ""),
	      "domains separate kinds");
	/* Frozen values: agents of different versions must agree on ids. */
	CHECK(ids_function("m", "f") == 0x159fd0505abbfc50ULL, "frozen function id");
	CHECK(ids_stack(frames_a, 3) == 0xced47fa0f8b37d70ULL, "frozen stack id");
	CHECK(ids_source("svc", "ns", "pod", "c", "n", "b") == 0x848c31d7c2fcb5abULL,
	      "frozen source id");

	CHECK(ids_parse_trace_id("4bf92f3577b34da6a3ce929d0e0e4736", tid) == 0, "valid trace id");
	ids_format_trace_id(tid, text);
	CHECK(strcmp(text, "4bf92f3577b34da6a3ce929d0e0e4736") == 0, "round trip: %s", text);
	CHECK(ids_parse_trace_id("4BF92F3577B34DA6A3CE929D0E0E4736", tid) == 0, "upper case ok");
	ids_format_trace_id(tid, text);
	CHECK(strcmp(text, "4bf92f3577b34da6a3ce929d0e0e4736") == 0, "formats lower case");
	CHECK(ids_parse_trace_id("00000000000000000000000000000000", tid) < 0, "all zero refused");
	CHECK(ids_parse_trace_id("4bf92f3577b34da6a3ce929d0e0e473", tid) < 0, "31 digits refused");
	CHECK(ids_parse_trace_id("4bf92f3577b34da6a3ce929d0e0e4736a", tid) < 0, "33 refused");
	CHECK(ids_parse_trace_id("4bf92f3577b34da6a3ce929d0e0e473g", tid) < 0, "non-hex refused");
	CHECK(ids_parse_trace_id(NULL, tid) < 0, "NULL refused");
	CHECK(ids_parse_span_id("00f067aa0ba902b7", &span) == 0 && span == 0x00f067aa0ba902b7ULL,
	      "span id parses big-endian");
	ids_format_span_id(span, stext);
	CHECK(strcmp(stext, "00f067aa0ba902b7") == 0, "span round trip %s", stext);
	CHECK(ids_parse_span_id("0000000000000000", &span) < 0, "zero span refused");
	ids_format_span_id(0xffffffffffffffffULL, stext);
	CHECK(strcmp(stext, "ffffffffffffffff") == 0, "high bit span %s", stext);
	return check_done();
}
