/*
 * test_utf8: tp_utf8_len, tp_utf8_safe_len and tp_utf8_sanitize on
 * hand-written cases: what is kept, what becomes '?', in place.
 */
#include <string.h>

#include "check.h"
#include "traceprof/utf8.h"

/* tp_utf8_sanitize of in (a string literal, NULs included) is want, with n replaced. */
#define SANITIZES(in, want, n)                                                                     \
	do {                                                                                       \
		char out_[sizeof(in)];                                                             \
		size_t r_ = tp_utf8_sanitize(out_, in, sizeof(in) - 1);                            \
		CHECK(strcmp(out_, want) == 0 && r_ == (n), "%s: got '%s', %zu replaced", #in,     \
		      out_, r_);                                                                   \
	} while (0)

static void test_sanitize(void)
{
	char buf[64];

	SANITIZES("", "", 0);
	SANITIZES("main", "main", 0);
	SANITIZES("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5",
		  "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5", 0); /* é → 🔥 */
	SANITIZES("a\x1b[31mb", "a?[31mb", 1);			   /* ESC (C0) */
	SANITIZES("a\tb\nc\rd", "a?b?c?d", 3);			   /* tab, newline, CR */
	SANITIZES("a\x00z", "a?z", 1);				   /* NUL inside the length */
	SANITIZES("del\x7f", "del?", 1);			   /* DEL */
	SANITIZES("\xc2\x80x\xc2\x9b"
		  "2J\xc2\x9f",
		  "?x?2J?", 3);			      /* C1: U+0080, CSI, U+009F */
	SANITIZES("\xc2\xa0nbsp", "\xc2\xa0nbsp", 0); /* U+00A0: first after C1 */
	SANITIZES("abc\xe2\x80\xae"
		  "fdp.exe",
		  "abc?fdp.exe", 1);						  /* U+202E RLO */
	SANITIZES("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad", "????", 4); /* U+202A-D */
	SANITIZES("\xe2\x81\xa6x\xe2\x81\xa9", "?x?", 2); /* U+2066, U+2069 */
	SANITIZES("\xe2\x80\xa9\xe2\x81\xaa", "\xe2\x80\xa9\xe2\x81\xaa",
		  0);				  /* U+2029, U+206A kept */
	SANITIZES("bad\xff\xfe", "bad??", 2);	  /* not UTF-8 */
	SANITIZES("\xc0\xaf", "??", 2);		  /* overlong '/' */
	SANITIZES("\xed\xa0\x80", "???", 3);	  /* a surrogate */
	SANITIZES("cut\xe2\x80", "cut??", 2);	  /* a sequence cut short */
	SANITIZES("\xf4\x90\x80\x80", "????", 4); /* above U+10FFFF */

	/* in place, and never longer */
	strcpy(buf, "x\xc2\x9b\xe2\x80\xae\xffy");
	CHECK(tp_utf8_sanitize(buf, buf, strlen(buf)) == 3 && strcmp(buf, "x???y") == 0,
	      "in place: '%s'", buf);
}

static void test_safe_len(void)
{
	const unsigned char csi[] = "\xc2\x9b", e_acute[] = "\xc3\xa9", rlo[] = "\xe2\x80\xae";

	CHECK(tp_utf8_safe_len((const unsigned char *)"a", 1) == 1, "ASCII letter");
	CHECK(tp_utf8_safe_len((const unsigned char *)" ", 1) == 1, "space");
	CHECK(tp_utf8_safe_len((const unsigned char *)"\x1f", 1) == 0, "U+001F");
	CHECK(tp_utf8_len(csi, 2) == 2 && tp_utf8_safe_len(csi, 2) == 0, "CSI: UTF-8, not safe");
	CHECK(tp_utf8_safe_len(e_acute, 2) == 2, "é");
	CHECK(tp_utf8_len(rlo, 3) == 3 && tp_utf8_safe_len(rlo, 3) == 0, "RLO: UTF-8, not safe");
	CHECK(tp_utf8_safe_len(rlo, 2) == 0, "cut short");
	CHECK(tp_utf8_safe_len(rlo, 0) == 0, "nothing left");
}

int main(void)
{
	test_sanitize();
	test_safe_len();
	return check_done();
}
