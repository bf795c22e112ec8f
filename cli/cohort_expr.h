/*
 * cohort_expr.h - the cohort expressions of `traceprof compare`
 * ("duration > 1s and status = 5xx") compiled to the cohort spec JSON of
 * the SQL API (docs/cohorts.md). The expression never becomes SQL text:
 * the result is a JSON object that traceprof.parse_cohort reads as values.
 *
 * Grammar (docs/cli.md):
 *   expr      := "all" | condition ("and" condition)*
 *   condition := "duration" (">" | ">=" | "<" | "<=") DURATION
 *              | "status" "=" STATUS | "status" "in" "(" STATUS ("," STATUS)* ")"
 *              | "route" ("~" | "=") ROUTE | "route" "in" "(" ROUTE ("," ROUTE)* ")"
 *              | "method" "=" WORD | "method" "in" "(" WORD ("," WORD)* ")"
 *   DURATION  := number unit, unit one of us, ms, s, m, h (e.g. 250ms, 1.5s)
 *   STATUS    := a code 100-599 or a class 1xx-5xx
 *   ROUTE     := a glob (* any run, ? one character) for "~", exact for "=";
 *                a route with spaces, commas or parentheses is written "quoted"
 */
#ifndef TRACEPROF_COHORT_EXPR_H
#define TRACEPROF_COHORT_EXPR_H

#include <stddef.h>
#include <stdio.h>

struct cohort_expr_error {
	size_t pos;	   /* byte offset of the offending token in the expression */
	char message[256]; /* what was wrong and what was expected */
};

/* Compiles expr to a cohort spec, a JSON object with keys in the order
 * min_duration, max_duration, status, route, method. Returns a string the
 * caller frees, or NULL with *err filled (pos, message). */
char *cohort_expr_compile(const char *expr, struct cohort_expr_error *err);

/* Prints "what: message", then the expression and a caret under err->pos. */
void cohort_expr_print_error(FILE *f, const char *what, const char *expr,
			     const struct cohort_expr_error *err);

#endif
