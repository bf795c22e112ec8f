/*
 * test_trigger_spec: the table of the trigger spec (trigger_spec.h) against
 * every other place that states the same rules, so that none can drift:
 * the CRD's schema (crds/: each field's type, minimum, maximum, length,
 * list size, default, required, enum, and the set of fields of spec and its
 * objects), the CHECK constraints and defaults of sql/, the agent's limits
 * (agent/sampling/triggers.h), the AgentControl Trigger message (each field names a
 * field of the right type; the comments of the .proto state the same
 * bounds and defaults), the defaults the validator fills in, and the
 * chart's copy of the CRD (byte for byte).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>
#include <yaml.h>

#include "check.h"
#include "manifest.h"
#include "traceprof/trigger_spec.h"
#include "triggers.h"

static yaml_document_t crd;

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1))) {
		*len = fread(buf, 1, (size_t)n, f);
		buf[*len] = '\0';
	}
	fclose(f);
	return buf;
}

/* The value of key in mapping n, or NULL. */
static yaml_node_t *get(yaml_node_t *n, const char *key)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(&crd, p->key);

		if (k && k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key))
			return yaml_document_get_node(&crd, p->value);
	}
	return NULL;
}

static const char *text(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *item(yaml_node_t *n, size_t i)
{
	if (!n || n->type != YAML_SEQUENCE_NODE ||
	    (size_t)(n->data.sequence.items.top - n->data.sequence.items.start) <= i)
		return NULL;
	return yaml_document_get_node(&crd, n->data.sequence.items.start[i]);
}

/* The schema of "spec.match.route" (or "spec"), NULL when the CRD has none. */
static yaml_node_t *schema_of(const char *path)
{
	yaml_node_t *n =
	    get(item(get(get(yaml_document_get_root_node(&crd), "spec"), "versions"), 0), "schema");
	char copy[128], *save = NULL;

	n = get(n, "openAPIV3Schema");
	snprintf(copy, sizeof(copy), "%s", path);
	for (char *seg = strtok_r(copy, ".", &save); seg; seg = strtok_r(NULL, ".", &save))
		n = get(get(n, "properties"), seg);
	return n;
}

/* n[key] is the integer want. */
static void check_num(const char *path, yaml_node_t *n, const char *key, long long want)
{
	const char *s = text(get(n, key));

	CHECK(s && atoll(s) == want, "%s: the CRD's %s is %s, the table's %lld", path, key,
	      s ? s : "unset", want);
}

static const char *crd_type(enum trigger_spec_type t)
{
	switch (t) {
	case TRIGGER_SPEC_UINT:
		return "integer";
	case TRIGGER_SPEC_BOOL:
		return "boolean";
	case TRIGGER_SPEC_SELECTOR:
		return "object";
	case TRIGGER_SPEC_PIDS:
	case TRIGGER_SPEC_PATHS:
		return "array";
	default:
		return "string";
	}
}

/* The path of the object f is in ("spec.sampling"), into buf. */
static const char *parent_of(const struct trigger_spec_field *f, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s", (int)(trigger_spec_key(f) - 1 - f->path), f->path);
	return buf;
}

static void check_crd_field(const struct trigger_spec_field *f)
{
	yaml_node_t *s = schema_of(f->path), *parent;
	const char *want = crd_type(f->type), *dflt;
	char parent_path[128];
	bool listed = false;

	CHECK(s, "%s: not in the CRD", f->path);
	if (!s)
		return;
	CHECK(text(get(s, "type")) && !strcmp(text(get(s, "type")), want),
	      "%s: the CRD's type is %s, the table's %s", f->path, text(get(s, "type")), want);
	switch (f->type) {
	case TRIGGER_SPEC_UINT:
		check_num(f->path, s, "minimum", f->min);
		check_num(f->path, s, "maximum", f->max);
		break;
	case TRIGGER_SPEC_PIDS:
		check_num(f->path, s, "maxItems", (long long)f->max_len);
		check_num(f->path, get(s, "items"), "minimum", f->min);
		check_num(f->path, get(s, "items"), "maximum", f->max);
		break;
	case TRIGGER_SPEC_PATHS:
		check_num(f->path, s, "maxItems", TRIGGER_SPEC_MAX_LIST);
		check_num(f->path, get(s, "items"), "maxLength", (long long)f->max_len);
		break;
	case TRIGGER_SPEC_SELECTOR:
		check_num(f->path,
			  get(get(get(get(get(s, "properties"), "matchExpressions"), "items"),
				  "properties"),
			      "key"),
			  "maxLength", TRIGGER_SPEC_LABEL_KEY_MAX);
		break;
	case TRIGGER_SPEC_BOOL:
		break;
	default:
		check_num(f->path, s, "maxLength", (long long)f->max_len);
	}
	if (f->type == TRIGGER_SPEC_DURATION && f->max) {
		char rule[64], d[32];
		const char *r = text(get(item(get(s, "x-kubernetes-validations"), 0), "rule"));

		manifest_format_duration((uint64_t)f->max * 1000, d, sizeof(d));
		snprintf(rule, sizeof(rule), "<= duration('%s')", d);
		CHECK(r && strstr(r, rule), "%s: the CRD's rule \"%s\" lacks \"%s\"", f->path,
		      r ? r : "", rule);
	}
	if (f->type == TRIGGER_SPEC_DURATION_US) { /* both bounds, in µs */
		char lo[32], hi[32], rule[96];
		const char *r = text(get(item(get(s, "x-kubernetes-validations"), 0), "rule"));

		manifest_format_duration((uint64_t)f->min, lo, sizeof(lo));
		manifest_format_duration((uint64_t)f->max, hi, sizeof(hi));
		snprintf(rule, sizeof(rule), "duration(self) >= duration('%s') && ", lo);
		CHECK(r && strstr(r, rule), "%s: the CRD's rule \"%s\" lacks \"%s\"", f->path,
		      r ? r : "", rule);
		snprintf(rule, sizeof(rule), "duration(self) <= duration('%s')", hi);
		CHECK(r && strstr(r, rule), "%s: the CRD's rule \"%s\" lacks \"%s\"", f->path,
		      r ? r : "", rule);
	}
	dflt = text(get(s, "default"));
	if (f->only_with) {
		/* no default the API server would fill in: it would always conflict */
		char rule[160];
		const char *desc = text(get(s, "description"));
		const char *r =
		    text(get(item(get(schema_of(parent_of(f, parent_path, sizeof(parent_path))),
				      "x-kubernetes-validations"),
				  0),
			     "rule"));

		CHECK(!dflt, "%s: the CRD has a default (%s), the field is set only with %s",
		      f->path, dflt, f->only_with);
		snprintf(rule, sizeof(rule), "!has(self.%s) || (has(self.%s) && self.%s)",
			 trigger_spec_key(f), trigger_spec_key(trigger_spec_field(f->only_with)),
			 trigger_spec_key(trigger_spec_field(f->only_with)));
		CHECK(r && !strcmp(r, rule), "%s: the CRD's rule is \"%s\", want \"%s\"", f->path,
		      r ? r : "", rule);
		CHECK(desc && f->default_text && strstr(desc, f->default_text),
		      "%s: the CRD's description does not state the default %s", f->path,
		      f->default_text ? f->default_text : "");
	} else {
		CHECK((!dflt && !f->default_text) ||
			  (dflt && f->default_text && !strcmp(dflt, f->default_text)),
		      "%s: the CRD's default is %s, the table's %s", f->path, dflt ? dflt : "unset",
		      f->default_text ? f->default_text : "unset");
	}
	CHECK(!get(s, "enum"), "%s: the CRD has an enum the table lacks", f->path);
	parent = schema_of(parent_of(f, parent_path, sizeof(parent_path)));
	for (size_t i = 0; item(get(parent, "required"), i); i++)
		listed |= !strcmp(text(item(get(parent, "required"), i)), trigger_spec_key(f));
	CHECK(listed == f->required, "%s: required in the CRD: %d, in the table: %d", f->path,
	      listed, f->required);
}

/* The CRD's properties of object path are exactly the table's keys under it. */
static void check_crd_keys(const char *path)
{
	yaml_node_t *props = get(schema_of(path), "properties");
	size_t plen = strlen(path), n = 0;

	CHECK(props && props->type == YAML_MAPPING_NODE, "%s: no properties in the CRD", path);
	if (!props)
		return;
	for (yaml_node_pair_t *p = props->data.mapping.pairs.start;
	     p < props->data.mapping.pairs.top; p++) {
		const char *k = text(yaml_document_get_node(&crd, p->key));
		bool found = false;

		for (size_t i = 0; i < trigger_spec_n_fields; i++) {
			const char *fp = trigger_spec_fields[i].path;

			found |= !strncmp(fp, path, plen) && fp[plen] == '.' &&
				 !strncmp(fp + plen + 1, k, strlen(k)) &&
				 (fp[plen + 1 + strlen(k)] == '.' || !fp[plen + 1 + strlen(k)]);
		}
		CHECK(found, "%s.%s: in the CRD, not in the table", path, k);
		n++;
	}
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const char *fp = trigger_spec_fields[i].path, *rest = fp + plen + 1;
		char key[64];

		if (strncmp(fp, path, plen) || fp[plen] != '.')
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(rest, "."), rest);
		CHECK(get(props, key), "%s.%s: in the table, not in the CRD", path, key);
	}
}

static void test_crd(void)
{
	static const char *const objects[] = {"spec", "spec.targets", "spec.match",
					      "spec.sampling"};
	yaml_parser_t p;
	size_t len = 0;
	char *buf = slurp(CRD_FILE, &len);

	CHECK(buf, "cannot read %s", CRD_FILE);
	if (!buf)
		return;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (unsigned char *)buf, len);
	CHECK(yaml_parser_load(&p, &crd), "%s: not YAML", CRD_FILE);
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		check_crd_field(&trigger_spec_fields[i]);
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++)
		check_crd_keys(objects[i]);
	yaml_parser_delete(&p);
	free(buf);
}

/* The text of every .sql file of sql/, one after the other. */
static char *all_sql(void)
{
	struct dirent **names;
	int n = scandir(SQL_DIR, &names, NULL, alphasort);
	size_t total = 0;
	char *all = calloc(1, 1);

	for (int i = 0; i < n; i++) {
		size_t nl = strlen(names[i]->d_name), len = 0;
		char path[4096], *text, *grown;

		if (nl > 4 && !strcmp(names[i]->d_name + nl - 4, ".sql")) {
			snprintf(path, sizeof(path), "%s/%s", SQL_DIR, names[i]->d_name);
			if ((text = slurp(path, &len)) && (grown = realloc(all, total + len + 1))) {
				all = grown;
				memcpy(all + total, text, len + 1);
				total += len;
			}
			free(text);
		}
		free(names[i]);
	}
	free(names);
	return all;
}

static void test_sql(void)
{
	char *sql = all_sql();
	size_t checked = 0;

	CHECK(sql && *sql, "no SQL in %s", SQL_DIR);
	for (size_t i = 0; sql && i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		char pat[128], col[128];
		long long lo = -1, hi = -1, dflt = -1;
		const char *at;
		int found = 0;

		if (!f->sql)
			continue;
		snprintf(pat, sizeof(pat), "CHECK (%s BETWEEN ", f->sql);
		for (at = sql; (at = strstr(at, pat)); at++, found++) {
			CHECK(sscanf(at + strlen(pat), "%lld AND %lld", &lo, &hi) == 2 &&
				  lo == f->min && hi == f->max,
			      "%s: SQL has %s%lld AND %lld, the table %lld..%lld", f->path, pat, lo,
			      hi, (long long)f->min, (long long)f->max);
		}
		CHECK(found >= 1, "%s: no \"%s\" in sql/", f->path, pat);
		snprintf(col, sizeof(col), "\n    %s ", f->sql);
		at = strstr(sql, col);
		at = at ? strstr(at, "DEFAULT ") : NULL;
		CHECK(at && sscanf(at, "DEFAULT %lld", &dflt) == 1 && f->default_text &&
			  dflt == atoll(f->default_text),
		      "%s: SQL default %lld, the table's %s", f->path, dflt,
		      f->default_text ? f->default_text : "unset");
		checked++;
	}
	CHECK(checked == 2, "%zu fields with an SQL column", checked);

	/* the phases: the SQL CHECK and the CRD's status.phase enum */
	const char *in = sql ? strstr(sql, "CHECK (phase IN (") : NULL;
	yaml_node_t *phases = get(schema_of("status.phase"), "enum");
	size_t n = 0;

	CHECK(in && phases, "no phase list in sql/ or the CRD");
	for (size_t i = 0; in && item(phases, i); i++, n++) {
		char quoted[64];
		const char *end = strchr(in, ')');

		snprintf(quoted, sizeof(quoted), "'%s'", text(item(phases, i)));
		CHECK(strstr(in, quoted) && strstr(in, quoted) < end,
		      "phase %s: not in the SQL CHECK", quoted);
	}
	CHECK(n == 6, "%zu phases in the CRD", n);
	free(sql);
}

static void test_agent(void)
{
	const struct trigger_spec_field *hz = trigger_spec_field("spec.sampling.frequencyHz");
	const struct trigger_spec_field *req = trigger_spec_field("spec.maxRequests");
	const struct trigger_spec_field *to = trigger_spec_field("spec.timeout");

	CHECK(hz && hz->max == TRIGGERS_MAX_HZ && atoll(hz->default_text) == TRIGGERS_DEFAULT_HZ,
	      "frequencyHz: the agent's limit or default differs");
	CHECK(req && req->max == TRIGGERS_MAX_REQUESTS &&
		  atoll(req->default_text) == TRIGGERS_DEFAULT_REQUESTS,
	      "maxRequests: the agent's limit or default differs");
	CHECK(to && to->max == TRIGGERS_MAX_LIFE_MS, "timeout: the agent's limit differs");
	CHECK(TRIGGERS_OFFCPU_DEFAULT_US == TRIGGER_SPEC_OFFCPU_DEFAULT_US &&
		  TRIGGERS_OFFCPU_MIN_US == TRIGGER_SPEC_OFFCPU_MIN_US &&
		  TRIGGERS_OFFCPU_MAX_US == TRIGGER_SPEC_OFFCPU_MAX_US,
	      "offCPUThreshold: the agent's limits differ");
}

/* The protobuf-c field of "criteria.route" in the Trigger message, or NULL. */
static const ProtobufCFieldDescriptor *proto_field(const char *path)
{
	const ProtobufCMessageDescriptor *d = &traceprof__control__v1__trigger__descriptor;
	const ProtobufCFieldDescriptor *fd = NULL;
	char copy[128], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", path);
	for (char *seg = strtok_r(copy, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
		if (!d)
			return NULL;
		fd = protobuf_c_message_descriptor_get_field_by_name(d, seg);
		if (!fd)
			return NULL;
		d = fd->type == PROTOBUF_C_TYPE_MESSAGE ? fd->descriptor : NULL;
	}
	return fd;
}

static void test_proto(void)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		const ProtobufCFieldDescriptor *fd = proto_field(f->proto);
		ProtobufCType want = PROTOBUF_C_TYPE_STRING;
		bool repeated = f->type == TRIGGER_SPEC_SELECTOR || f->type == TRIGGER_SPEC_PIDS ||
				f->type == TRIGGER_SPEC_PATHS;

		if (f->type == TRIGGER_SPEC_UINT || f->type == TRIGGER_SPEC_PIDS ||
		    f->type == TRIGGER_SPEC_DURATION_US)
			want = PROTOBUF_C_TYPE_UINT32;
		else if (f->type == TRIGGER_SPEC_BOOL)
			want = PROTOBUF_C_TYPE_BOOL;
		else if (f->type == TRIGGER_SPEC_DURATION)
			want = f->max ? PROTOBUF_C_TYPE_INT64 : PROTOBUF_C_TYPE_UINT64;
		CHECK(fd, "%s: no field %s in the Trigger message", f->path, f->proto);
		if (!fd)
			continue;
		CHECK(fd->type == want, "%s: %s has protobuf-c type %d, not %d", f->path, f->proto,
		      (int)fd->type, (int)want);
		CHECK((fd->label == PROTOBUF_C_LABEL_REPEATED) == repeated, "%s: %s %s repeated",
		      f->path, f->proto, repeated ? "not" : "is");
	}
}

/* The comments of agent_control.proto state the bounds and defaults of the numbers. */
static void test_proto_comments(void)
{
	size_t len = 0, n = 0;
	char *proto = slurp(PROTO_FILE, &len);

	CHECK(proto, "cannot read %s", PROTO_FILE);
	for (size_t i = 0; proto && i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		long long lo = -1, hi = -1, dflt = -1;
		char decl[96];
		const char *at;

		uint64_t want_dflt = 0;

		if (f->type == TRIGGER_SPEC_UINT)
			want_dflt = (uint64_t)atoll(f->default_text);
		else if (f->type != TRIGGER_SPEC_DURATION_US ||
			 manifest_parse_duration(f->default_text, &want_dflt))
			continue; /* a DURATION_US's default in µs */
		snprintf(decl, sizeof(decl), "uint32 %s = ", f->proto);
		at = strstr(proto, decl);
		at = at ? strstr(at, "//") : NULL;
		CHECK(at &&
			  sscanf(at, "// %lld..%lld; 0 means the default, %lld", &lo, &hi, &dflt) ==
			      3 &&
			  lo == f->min && hi == f->max && dflt == (long long)want_dflt,
		      "%s: the comment of %s says %lld..%lld, default %lld", f->path, f->proto, lo,
		      hi, dflt);
		n++;
	}
	CHECK(n == 3, "%zu numbers in the Trigger message", n);
	free(proto);
}

/* What the validator fills in for an unset field is the table's default. */
static void test_defaults(void)
{
	static const char doc[] = "apiVersion: traceprof.dev/v1alpha1\n"
				  "kind: TraceProfileTrigger\n"
				  "metadata: {name: d}\n"
				  "spec: {service: s}\n";
	struct manifest_opts mo = {.local = true};
	struct manifest_list l = {0};
	uint64_t us = 0;

	CHECK(manifest_parse_buffer(&l, "d.yaml", doc, strlen(doc), &mo) == 0 && l.n == 1,
	      "the minimal manifest is refused");
	if (l.n != 1)
		return;
	CHECK(l.items[0].frequency_hz ==
		  (uint32_t)atoll(trigger_spec_field("spec.sampling.frequencyHz")->default_text),
	      "frequencyHz default %u", l.items[0].frequency_hz);
	CHECK(l.items[0].max_requests ==
		  (uint32_t)atoll(trigger_spec_field("spec.maxRequests")->default_text),
	      "maxRequests default %u", l.items[0].max_requests);
	CHECK(manifest_parse_duration(trigger_spec_field("spec.timeout")->default_text, &us) == 0 &&
		  l.items[0].timeout_ms == us / 1000 &&
		  us / 1000 == TRIGGER_SPEC_TIMEOUT_DEFAULT_MS,
	      "timeout default %llu ms", (unsigned long long)l.items[0].timeout_ms);
	CHECK(!l.items[0].offcpu, "offCPU default true");
	CHECK(manifest_parse_duration(
		  trigger_spec_field("spec.sampling.offCPUThreshold")->default_text, &us) == 0 &&
		  l.items[0].offcpu_threshold_us == us && us == TRIGGER_SPEC_OFFCPU_DEFAULT_US,
	      "offCPUThreshold default %u us", l.items[0].offcpu_threshold_us);
	manifest_list_free(&l);
}

static void test_chart_copy(void)
{
	size_t a_len = 0, b_len = 0;
	char *a = slurp(CRD_FILE, &a_len), *b = slurp(CHART_CRD_FILE, &b_len);

	CHECK(a && b && a_len == b_len && !memcmp(a, b, a_len),
	      "%s differs from %s: copy crds/ into the chart", CHART_CRD_FILE, CRD_FILE);
	free(a);
	free(b);
}

int main(void)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		CHECK(trigger_spec_fields[i].path && trigger_spec_fields[i].proto &&
			  trigger_spec_fields[i].help,
		      "entry %zu of the table is not filled in (TRIGGER_SPEC_N_FIELDS)", i);
	if (check_failed)
		return check_done();
	test_crd();
	test_sql();
	test_agent();
	test_proto();
	test_proto_comments();
	test_defaults();
	test_chart_copy();
	yaml_document_delete(&crd);
	return check_done();
}
