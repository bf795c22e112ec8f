/*
 * test_cli_output: the traceprof command's escaping of what it prints
 * (cli_open_output's text stream, cli_json_str), on hand-written text
 * written whole and one byte per write (characters cut between writes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"

/* What the text stream makes of in, written whole or a byte at a time. */
static char *through_text(const char *in, size_t len, int bytewise)
{
	char path[] = "/tmp/tp-cli-output-XXXXXX", *out = calloc(1, 4096);
	int fd = mkstemp(path);
	FILE *f, *r;

	if (fd < 0 || !out)
		return out;
	close(fd);
	f = cli_open_output(path, CLI_FMT_TEXT);
	if (bytewise)
		setvbuf(f, NULL, _IONBF, 0);
	for (size_t i = 0; bytewise && i < len; i++)
		fputc(in[i], f);
	if (!bytewise)
		fwrite(in, 1, len, f);
	cli_close_output(f, path);
	r = fopen(path, "r");
	if (r) {
		fread(out, 1, 4095, r);
		fclose(r);
	}
	unlink(path);
	return out;
}

#define TEXT(in, want)                                                                             \
	do {                                                                                       \
		for (int b_ = 0; b_ < 2; b_++) {                                                   \
			char *got_ = through_text(in, sizeof(in) - 1, b_);                         \
			CHECK(got_ &&strcmp(got_, want) == 0, "%s%s: got '%s'", #in,               \
			      b_ ? " (a byte a write)" : "", got_);                                \
			free(got_);                                                                \
		}                                                                                  \
	} while (0)

static void test_text(void)
{
	TEXT("plain \xe2\x94\x94\xe2\x94\x80 caf\xc3\xa9 \xf0\x9f\x94\xa5\n\tnext\n",
	     "plain \xe2\x94\x94\xe2\x94\x80 caf\xc3\xa9 \xf0\x9f\x94\xa5\n\tnext\n");
	TEXT("a\x1b[2Jb\rc\x7f", "a\\u001b[2Jb\\u000dc\\u007f");
	TEXT("csi\xc2\x9b"
	     "31m rlo\xe2\x80\xae"
	     "x lri\xe2\x81\xa6",
	     "csi\\u009b31m rlo\\u202ex lri\\u2066");
	TEXT("bad\xff\xc3(", "bad\\xff\\xc3(");
	TEXT("\xc3\xc3\xa9", "\\xc3\xc3\xa9"); /* a cut lead, then a whole character */
	TEXT("end\xe2\x80", "end\\xe2\\x80");  /* cut at the end */
}

/* cli_json_str of in. */
static char *json(const char *in)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	cli_json_str(f, in);
	fclose(f);
	return buf;
}

#define JSON(in, want)                                                                             \
	do {                                                                                       \
		char *got_ = json(in);                                                             \
		CHECK(got_ &&strcmp(got_, want) == 0, "%s: got %s", #in, got_);                    \
		free(got_);                                                                        \
	} while (0)

static void test_json(void)
{
	JSON("caf\xc3\xa9 \"q\" \\", "\"caf\xc3\xa9 \\\"q\\\" \\\\\"");
	JSON("a\x1b\x7f\n", "\"a\\u001b\\u007f\\n\"");
	JSON("csi\xc2\x9b rlo\xe2\x80\xae pdi\xe2\x81\xa9", "\"csi\\u009b rlo\\u202e pdi\\u2069\"");
	JSON("bad\xff"
	     "x",
	     "\"bad\\ufffdx\"");
	JSON("\xf0\x9f\x94\xa5", "\"\xf0\x9f\x94\xa5\"");
}

int main(void)
{
	test_text();
	test_json();
	return check_done();
}
