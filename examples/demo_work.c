/*
 * demo_work.c - the CPU work of the demo service (see demo_work.h).
 *
 * Each business function repeats its real work until the thread's CPU
 * budget is spent. The thread CPU clock is a system call, so it is read
 * about every 20 us of work only (budget_more). Functions that must show
 * up as frames are NOINLINE, and the examples build without sibling-call
 * optimisation, so a call in tail position keeps its caller's frame too.
 * Hot loops call no libc: Debian's libc is built without frame pointers,
 * and a sample inside it loses its caller's frame.
 *
 * The slow tail is RSA signature verification done by hand: Montgomery
 * multiplication (CIOS, 32-bit limbs) on a 2048-bit modulus, public
 * exponent 65537. Squarings are inlined into bn_mod_exp and the few other
 * products go through bn_mul, so about 5/6 of its samples land in
 * bn_mod_exp itself and the rest in bn_mul. The key and the signature are
 * synthetic (an odd random modulus, not a product of primes): the
 * arithmetic is the real cost of a verification, nothing is secured.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "demo_work.h"

/*
 * Kept as its own frame under its own name: GCC's noipa also stops the
 * constprop/isra clones whose names (bn_mod_exp.constprop.0) a profile would
 * show instead.
 */
/*
 * Helpers are folded into the business function that calls them: GCC 12
 * omits the frame pointer of a leaf function that needs no stack frame even
 * with -mno-omit-leaf-frame-pointer, and a sample in such a helper would
 * lose the business function's frame.
 */
#define ALWAYS_INLINE inline __attribute__((always_inline))
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa))
#endif
#define CLOCK_INTERVAL_NS 20000 /* least CPU time between two clock reads */
#define BN_LIMBS	  64	/* 2048-bit numbers in 32-bit limbs */
#define RSA_E		  65537u
#define PROMO_RULES	  64 /* volume discount rules computeTotal scans */

struct cpu_budget {
	int64_t end_ns;	 /* thread CPU time at which the budget is spent */
	int64_t last_ns; /* thread CPU time at the last clock read */
	unsigned rounds; /* rounds since the last clock read */
	unsigned batch;	 /* rounds between clock reads */
	bool zero;	 /* work scale 0: one round only */
};

struct bn {
	uint32_t d[BN_LIMBS]; /* little-endian limbs */
};

struct rsa_key {
	struct bn n;	/* modulus, odd, top bit set */
	uint32_t n0inv; /* -n^-1 mod 2^32, for Montgomery reduction */
	struct bn rr;	/* R^2 mod n, R = 2^2048: into Montgomery form */
	struct bn one;	/* the number 1: out of Montgomery form */
	struct bn sig;	/* the signature verified */
	struct bn em;	/* sig^e mod n: the encoded message expected */
};

struct promo_rule {
	uint32_t sku_hash_mod; /* rule applies when sku hash % 8 equals this */
	uint32_t min_qty;      /* smallest quantity that earns it */
	uint32_t percent;      /* discount in percent */
};

struct inventory_entry {
	char sku[DEMO_SKU_LEN]; /* "SKU-%04u", sorted */
	uint32_t on_hand;	/* units in stock */
	uint32_t warehouse;	/* warehouse number */
};

static double work_scale = 1.0;
static struct rsa_key demo_key;
static struct promo_rule promo_rules[PROMO_RULES];
static uint16_t tax_bp[256]; /* tax in basis points by SKU hash */
static struct inventory_entry inventory[DEMO_SKU_COUNT];
static atomic_int gateway_reply; /* never set: the gateway is down */
/* Sinks that keep loops from being optimised away; per thread, so race-free. */
static _Thread_local volatile uint64_t checksum_sink; /* refreshCache's result */
static _Thread_local volatile uint64_t backoff_sink;  /* gatewayTimeout's result */

int64_t demo_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void budget_start(struct cpu_budget *b, double ms)
{
	b->zero = work_scale == 0;
	b->last_ns = demo_thread_cpu_ns();
	b->end_ns = b->last_ns + (int64_t)(ms * work_scale * 1e6);
	b->rounds = 0;
	b->batch = 1;
}

/*
 * Counts a round; true while the budget lasts. The clock is read every
 * batch rounds, and the batch doubles until reads are CLOCK_INTERVAL_NS
 * apart, so cheap rounds do not turn the profile into clock_gettime.
 */
static ALWAYS_INLINE bool budget_more(struct cpu_budget *b)
{
	int64_t now;

	if (b->zero)
		return false;
	if (++b->rounds < b->batch)
		return true;
	b->rounds = 0;
	now = demo_thread_cpu_ns();
	if (now - b->last_ns < CLOCK_INTERVAL_NS && b->batch < (1u << 20))
		b->batch *= 2;
	b->last_ns = now;
	return now < b->end_ns;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static ALWAYS_INLINE uint32_t fnv1a(const void *data, size_t len, uint32_t h)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ---- big numbers ---- */

/* r = a * b * R^-1 mod n (CIOS). r may alias a or b. */
static inline __attribute__((always_inline)) void
mont_mul(struct bn *r, const struct bn *a, const struct bn *b, const struct rsa_key *k)
{
	uint32_t t[BN_LIMBS + 2] = {0};

	for (int i = 0; i < BN_LIMBS; i++) {
		uint64_t c = 0;
		uint32_t m;

		for (int j = 0; j < BN_LIMBS; j++) {
			c += (uint64_t)a->d[j] * b->d[i] + t[j];
			t[j] = (uint32_t)c;
			c >>= 32;
		}
		c += t[BN_LIMBS];
		t[BN_LIMBS] = (uint32_t)c;
		t[BN_LIMBS + 1] = (uint32_t)(c >> 32);
		m = t[0] * k->n0inv;
		c = ((uint64_t)m * k->n.d[0] + t[0]) >> 32;
		for (int j = 1; j < BN_LIMBS; j++) {
			c += (uint64_t)m * k->n.d[j] + t[j];
			t[j - 1] = (uint32_t)c;
			c >>= 32;
		}
		c += t[BN_LIMBS];
		t[BN_LIMBS - 1] = (uint32_t)c;
		t[BN_LIMBS] = t[BN_LIMBS + 1] + (uint32_t)(c >> 32);
	}
	/* t < 2n: subtract n once when t >= n. */
	{
		bool ge = t[BN_LIMBS] != 0;

		if (!ge) {
			int i = BN_LIMBS - 1;

			while (i >= 0 && t[i] == k->n.d[i])
				i--;
			ge = i < 0 || t[i] > k->n.d[i];
		}
		if (ge) {
			int64_t borrow = 0;

			for (int i = 0; i < BN_LIMBS; i++) {
				borrow += (int64_t)t[i] - k->n.d[i];
				t[i] = (uint32_t)borrow;
				borrow >>= 32;
			}
		}
	}
	memcpy(r->d, t, sizeof(r->d));
}

static NOINLINE void bn_mul(struct bn *r, const struct bn *a, const struct bn *b,
			    const struct rsa_key *k)
{
	mont_mul(r, a, b, k);
}

/* r = base^e mod n: left-to-right square and multiply. */
static NOINLINE void bn_mod_exp(struct bn *r, const struct bn *base, uint32_t e,
				const struct rsa_key *k)
{
	struct bn x, acc;
	int top = 31;

	while (top > 0 && !(e >> top & 1))
		top--;
	bn_mul(&x, base, &k->rr, k);
	acc = x;
	for (int bit = top - 1; bit >= 0; bit--) {
		mont_mul(&acc, &acc, &acc, k);
		if (e >> bit & 1)
			bn_mul(&acc, &acc, &x, k);
	}
	bn_mul(r, &acc, &k->one, k);
}

static NOINLINE int rsa_verify(const struct rsa_key *k, const struct bn *sig, const struct bn *em)
{
	struct bn m;

	bn_mod_exp(&m, sig, RSA_E, k);
	return memcmp(&m, em, sizeof(m)) ? -EBADMSG : 0;
}

static bool bn_ge(const struct bn *a, const struct bn *b)
{
	for (int i = BN_LIMBS - 1; i >= 0; i--)
		if (a->d[i] != b->d[i])
			return a->d[i] > b->d[i];
	return true;
}

static void bn_sub(struct bn *a, const struct bn *b)
{
	int64_t borrow = 0;

	for (int i = 0; i < BN_LIMBS; i++) {
		borrow += (int64_t)a->d[i] - b->d[i];
		a->d[i] = (uint32_t)borrow;
		borrow >>= 32;
	}
}

/* a = 2a mod n, for a < n. */
static void bn_double_mod(struct bn *a, const struct bn *n)
{
	uint32_t carry = 0;

	for (int i = 0; i < BN_LIMBS; i++) {
		uint32_t next = a->d[i] >> 31;

		a->d[i] = a->d[i] << 1 | carry;
		carry = next;
	}
	if (carry || bn_ge(a, n))
		bn_sub(a, n);
}

/* a = (a + b) mod n, for a, b < n. */
static void bn_add_mod(struct bn *a, const struct bn *b, const struct bn *n)
{
	uint64_t c = 0;

	for (int i = 0; i < BN_LIMBS; i++) {
		c += (uint64_t)a->d[i] + b->d[i];
		a->d[i] = (uint32_t)c;
		c >>= 32;
	}
	if (c || bn_ge(a, n))
		bn_sub(a, n);
}

/* Reference: r = a * b mod n by shift and add, no Montgomery form. */
static void bn_mulmod_ref(struct bn *r, const struct bn *a, const struct bn *b, const struct bn *n)
{
	struct bn acc = {{0}};

	for (int i = BN_LIMBS * 32 - 1; i >= 0; i--) {
		bn_double_mod(&acc, n);
		if (b->d[i / 32] >> (i % 32) & 1)
			bn_add_mod(&acc, a, n);
	}
	*r = acc;
}

static void rsa_key_init(struct rsa_key *k, uint64_t seed)
{
	uint32_t inv;

	for (int i = 0; i < BN_LIMBS; i++)
		k->n.d[i] = (uint32_t)splitmix(&seed);
	k->n.d[0] |= 1;
	k->n.d[BN_LIMBS - 1] |= 0x80000000u;
	inv = k->n.d[0]; /* correct to 3 bits for odd n; Newton doubles them */
	for (int i = 0; i < 4; i++)
		inv *= 2 - k->n.d[0] * inv;
	k->n0inv = 0u - inv;
	memset(&k->rr, 0, sizeof(k->rr));
	k->rr.d[0] = 1;
	for (int i = 0; i < 2 * BN_LIMBS * 32; i++)
		bn_double_mod(&k->rr, &k->n);
	memset(&k->one, 0, sizeof(k->one));
	k->one.d[0] = 1;
	for (int i = 0; i < BN_LIMBS; i++)
		k->sig.d[i] = (uint32_t)splitmix(&seed);
	k->sig.d[BN_LIMBS - 1] = k->n.d[BN_LIMBS - 1] >> 1;
	bn_mod_exp(&k->em, &k->sig, RSA_E, k);
}

int demo_work_self_test(void)
{
	struct bn ref, got;

	/* sig^e by the reference multiplication must match the Montgomery result. */
	ref = demo_key.sig;
	for (int bit = 15; bit >= 0; bit--) {
		bn_mulmod_ref(&ref, &ref, &ref, &demo_key.n);
		if (RSA_E >> bit & 1)
			bn_mulmod_ref(&ref, &ref, &demo_key.sig, &demo_key.n);
	}
	bn_mod_exp(&got, &demo_key.sig, RSA_E, &demo_key);
	if (memcmp(&ref, &got, sizeof(ref)) || memcmp(&got, &demo_key.em, sizeof(got)))
		return -EIO;
	return rsa_verify(&demo_key, &demo_key.sig, &demo_key.em) ? -EIO : 0;
}

/* ---- orders ---- */

struct json {
	const char *p;	 /* next byte */
	const char *end; /* end of input */
};

static ALWAYS_INLINE void json_ws(struct json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static ALWAYS_INLINE bool json_eat(struct json *j, char c)
{
	json_ws(j);
	if (j->p < j->end && *j->p == c) {
		j->p++;
		return true;
	}
	return false;
}

/* A string without escapes or control bytes. */
static ALWAYS_INLINE int json_string(struct json *j, const char **s, size_t *len)
{
	if (!json_eat(j, '"'))
		return -EINVAL;
	*s = j->p;
	while (j->p < j->end && *j->p != '"') {
		if ((unsigned char)*j->p < 0x20 || *j->p == '\\')
			return -EINVAL;
		j->p++;
	}
	if (j->p == j->end)
		return -EINVAL;
	*len = j->p - *s;
	j->p++;
	return 0;
}

static ALWAYS_INLINE int json_uint(struct json *j, uint64_t max, uint64_t *v)
{
	int digits = 0;

	json_ws(j);
	*v = 0;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
		*v = *v * 10 + (uint64_t)(*j->p++ - '0');
		if (++digits > 12)
			return -EINVAL;
	}
	return digits && *v <= max ? 0 : -EINVAL;
}

/* Skips a string or unsigned number value. */
static ALWAYS_INLINE int json_skip_value(struct json *j)
{
	const char *s;
	size_t len;
	uint64_t v;

	json_ws(j);
	if (j->p < j->end && *j->p == '"')
		return json_string(j, &s, &len);
	return json_uint(j, UINT64_MAX, &v);
}

static ALWAYS_INLINE bool key_is(const char *s, size_t len, const char *lit)
{
	size_t i = 0;

	/* A loop, not libc: see sku_equal. */
	while (i < len && lit[i] && s[i] == lit[i])
		i++;
	return i == len && !lit[i];
}

static ALWAYS_INLINE int json_item(struct json *j, struct demo_item *it)
{
	unsigned seen = 0;
	uint64_t v;

	if (!json_eat(j, '{'))
		return -EINVAL;
	do {
		const char *k, *s;
		size_t klen, slen;

		if (json_string(j, &k, &klen) || !json_eat(j, ':'))
			return -EINVAL;
		if (key_is(k, klen, "sku")) {
			if (json_string(j, &s, &slen) || slen == 0 || slen >= DEMO_SKU_LEN)
				return -EINVAL;
			for (size_t i = 0; i < slen; i++)
				it->sku[i] = s[i];
			it->sku[slen] = '\0';
			seen |= 1;
		} else if (key_is(k, klen, "qty")) {
			if (json_uint(j, DEMO_MAX_QTY, &v) || v == 0)
				return -EINVAL;
			it->qty = (uint32_t)v;
			seen |= 2;
		} else if (key_is(k, klen, "price_cents")) {
			if (json_uint(j, DEMO_MAX_PRICE, &v))
				return -EINVAL;
			it->price_cents = (uint32_t)v;
			seen |= 4;
		} else if (json_skip_value(j)) {
			return -EINVAL;
		}
	} while (json_eat(j, ','));
	return json_eat(j, '}') && seen == 7 ? 0 : -EINVAL;
}

static ALWAYS_INLINE int json_items(struct json *j, struct demo_order *o)
{
	if (!json_eat(j, '['))
		return -EINVAL;
	o->n_items = 0;
	do {
		if (o->n_items == DEMO_MAX_ITEMS || json_item(j, &o->items[o->n_items]))
			return -EINVAL;
		o->n_items++;
	} while (json_eat(j, ','));
	return json_eat(j, ']') ? 0 : -EINVAL;
}

static ALWAYS_INLINE int parse_order_once(const char *body, size_t len, struct demo_order *o)
{
	struct json j = {body, body + len};
	bool items = false;

	o->n_items = 0; /* json_item sets every field of an item or fails */
	if (!json_eat(&j, '{'))
		return -EINVAL;
	do {
		const char *k;
		size_t klen;

		if (json_string(&j, &k, &klen) || !json_eat(&j, ':'))
			return -EINVAL;
		if (key_is(k, klen, "items")) {
			if (items || json_items(&j, o))
				return -EINVAL;
			items = true;
		} else if (json_skip_value(&j)) {
			return -EINVAL;
		}
	} while (json_eat(&j, ','));
	if (!json_eat(&j, '}') || !items)
		return -EINVAL;
	json_ws(&j);
	return j.p == j.end ? 0 : -EINVAL;
}

NOINLINE int parseOrder(const char *body, size_t len, struct demo_order *order)
{
	static const char default_order[] =
	    "{\"items\":[{\"sku\":\"SKU-0001\",\"qty\":1,\"price_cents\":1999}]}";
	struct cpu_budget b;
	int rc;

	if (len == 0) {
		body = default_order;
		len = sizeof(default_order) - 1;
	}
	budget_start(&b, DEMO_PARSE_ORDER_MS);
	do {
		rc = parse_order_once(body, len, order);
	} while (!rc && budget_more(&b));
	return rc;
}

static ALWAYS_INLINE uint32_t sku_hash(const char *sku)
{
	uint32_t h = 2166136261u;

	while (*sku)
		h = (h ^ (unsigned char)*sku++) * 16777619u;
	return h;
}

static ALWAYS_INLINE void total_once(const struct demo_order *o, struct demo_total *t)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < o->n_items; i++) {
		const struct demo_item *it = &o->items[i];
		uint64_t line = (uint64_t)it->qty * it->price_cents;
		uint32_t h = sku_hash(it->sku);
		uint32_t best = 0;

		for (int r = 0; r < PROMO_RULES; r++) {
			const struct promo_rule *p = &promo_rules[r];

			if (h % 8 == p->sku_hash_mod && it->qty >= p->min_qty && p->percent > best)
				best = p->percent;
		}
		t->subtotal_cents += line;
		t->discount_cents += line * best / 100;
		t->tax_cents += (line - line * best / 100) * tax_bp[h & 255] / 10000;
	}
	t->total_cents = t->subtotal_cents - t->discount_cents + t->tax_cents;
}

NOINLINE int computeTotal(const struct demo_order *order, struct demo_total *total)
{
	struct cpu_budget b;

	budget_start(&b, DEMO_COMPUTE_TOTAL_MS);
	do
		total_once(order, total);
	while (budget_more(&b));
	return 0;
}

/* ---- JSON output ---- */

struct out_buf {
	char *p;     /* start of the buffer */
	size_t size; /* bytes at p */
	size_t len;  /* bytes written, NUL excluded */
	bool full;   /* something did not fit */
};

static ALWAYS_INLINE void out_char(struct out_buf *o, char c)
{
	if (o->len + 1 < o->size)
		o->p[o->len++] = c;
	else
		o->full = true;
}

static ALWAYS_INLINE void out_lit(struct out_buf *o, const char *s)
{
	while (*s)
		out_char(o, *s++);
}

/* A JSON string with the escapes RFC 8259 requires. */
static ALWAYS_INLINE void out_json_string(struct out_buf *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	out_char(o, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out_char(o, '\\');
			out_char(o, (char)c);
		} else if (c < 0x20) {
			out_lit(o, "\\u00");
			out_char(o, hex[c >> 4]);
			out_char(o, hex[c & 15]);
		} else {
			out_char(o, (char)c);
		}
	}
	out_char(o, '"');
}

static ALWAYS_INLINE void out_u64(struct out_buf *o, uint64_t v)
{
	char digits[24];
	int n = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		out_char(o, digits[--n]);
}

/* Cents as a decimal string, e.g. "12.05". */
static ALWAYS_INLINE void out_money(struct out_buf *o, uint64_t cents)
{
	out_char(o, '"');
	out_u64(o, cents / 100);
	out_char(o, '.');
	out_char(o, (char)('0' + cents % 100 / 10));
	out_char(o, (char)('0' + cents % 10));
	out_char(o, '"');
}

static ALWAYS_INLINE void serialize_once(const struct demo_order *order, const struct demo_total *t,
					 const char *trace_id_hex, struct out_buf *o)
{
	o->len = 0;
	o->full = false;
	out_lit(o, "{\"status\":\"confirmed\",\"trace_id\":");
	out_json_string(o, trace_id_hex);
	out_lit(o, ",\"items\":[");
	for (size_t i = 0; i < order->n_items; i++) {
		const struct demo_item *it = &order->items[i];

		out_lit(o, i ? ",{\"sku\":" : "{\"sku\":");
		out_json_string(o, it->sku);
		out_lit(o, ",\"qty\":");
		out_u64(o, it->qty);
		out_lit(o, ",\"line_total\":");
		out_money(o, (uint64_t)it->qty * it->price_cents);
		out_char(o, '}');
	}
	out_lit(o, "],\"subtotal\":");
	out_money(o, t->subtotal_cents);
	out_lit(o, ",\"discount\":");
	out_money(o, t->discount_cents);
	out_lit(o, ",\"tax\":");
	out_money(o, t->tax_cents);
	out_lit(o, ",\"total\":");
	out_money(o, t->total_cents);
	out_lit(o, "}\n");
	o->p[o->len] = '\0';
}

NOINLINE int serializeResponse(const struct demo_order *order, const struct demo_total *total,
			       const char *trace_id_hex, char *out, size_t out_size,
			       size_t *out_len)
{
	struct out_buf o = {out, out_size, 0, false};
	struct cpu_budget b;

	if (out_size == 0)
		return -ENOSPC;
	budget_start(&b, DEMO_SERIALIZE_RESPONSE_MS);
	do
		serialize_once(order, total, trace_id_hex, &o);
	while (!o.full && budget_more(&b));
	*out_len = o.len;
	return o.full ? -ENOSPC : 0;
}

/* ---- the slow tail ---- */

NOINLINE int validateSignature(const struct demo_order *order)
{
	struct cpu_budget b;
	uint32_t digest = 2166136261u;
	int rc;

	/* The digest would select the signature of a real order; ours is fixed. */
	for (size_t i = 0; i < order->n_items; i++)
		digest = fnv1a(&order->items[i], sizeof(order->items[i]), digest);
	(void)digest;
	budget_start(&b, DEMO_VALIDATE_SIGNATURE_MS);
	do
		rc = rsa_verify(&demo_key, &demo_key.sig, &demo_key.em);
	while (!rc && budget_more(&b));
	return rc;
}

/* ---- inventory ---- */

/*
 * strncmp without libc: Debian's libc has no frame pointers, so a sample
 * inside it loses its caller's frame; the hot loops of the demo stay in
 * code built with them.
 */
static ALWAYS_INLINE int sku_compare(const char *a, const char *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (a[i] != b[i] || !a[i])
			return (unsigned char)a[i] - (unsigned char)b[i];
	}
	return 0;
}

static ALWAYS_INLINE const struct inventory_entry *inventory_find(const char *sku, size_t len)
{
	size_t lo = 0, hi = DEMO_SKU_COUNT;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = sku_compare(inventory[mid].sku, sku, len);

		if (c == 0 && inventory[mid].sku[len] == '\0')
			return &inventory[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

NOINLINE int lookupInventory(const char *sku, size_t sku_len, struct demo_stock *stock)
{
	const struct inventory_entry *e;
	struct cpu_budget b;

	if (sku_len == 0 || sku_len >= DEMO_SKU_LEN)
		return -ENOENT;
	budget_start(&b, DEMO_LOOKUP_INVENTORY_MS);
	do
		e = inventory_find(sku, sku_len);
	while (e && budget_more(&b));
	if (!e)
		return -ENOENT;
	memcpy(stock->sku, e->sku, sizeof(stock->sku));
	stock->on_hand = e->on_hand;
	stock->warehouse = e->warehouse;
	return 0;
}

/* ---- the failing payment ---- */

/* Waits for a gateway reply that never comes, spinning with jittered backoff. */
static NOINLINE int gatewayTimeout(uint32_t request_crc)
{
	struct cpu_budget b;
	uint64_t jitter = request_crc;

	budget_start(&b, DEMO_GATEWAY_TIMEOUT_MS);
	do {
		for (int spin = 0; spin < 256; spin++) {
			if (atomic_load_explicit(&gateway_reply, memory_order_acquire))
				return 0;
			jitter = jitter * 6364136223846793005ULL + 1442695040888963407ULL;
		}
	} while (budget_more(&b));
	backoff_sink = jitter;
	return -ETIMEDOUT;
}

static ALWAYS_INLINE uint32_t crc32_bitwise(const void *data, size_t len, uint32_t crc)
{
	const unsigned char *p = data;

	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

NOINLINE int chargeCard(const struct demo_order *order, const struct demo_total *total)
{
	struct cpu_budget b;
	uint32_t crc;

	budget_start(&b, DEMO_CHARGE_CARD_MS);
	do {
		crc = crc32_bitwise(total, sizeof(*total), 0);
		crc = crc32_bitwise(order->items, order->n_items * sizeof(order->items[0]), crc);
	} while (budget_more(&b));
	return gatewayTimeout(crc);
}

/* ---- background ---- */

NOINLINE int refreshCache(void)
{
	struct cpu_budget b;

	budget_start(&b, DEMO_REFRESH_CACHE_MS);
	do {
		uint64_t all = 0;

		for (size_t i = 0; i < DEMO_SKU_COUNT; i++) {
			const struct inventory_entry *e = &inventory[i];
			uint32_t h = fnv1a(e->sku, sizeof(e->sku), 2166136261u);

			h = fnv1a(&e->on_hand, sizeof(e->on_hand), h);
			all ^= ((uint64_t)h << 32 | e->warehouse) * (i + 1);
		}
		checksum_sink = all;
	} while (budget_more(&b));
	return 0;
}

/* ---- set-up ---- */

int demo_work_init(double scale)
{
	uint64_t seed = 0x7472616365ULL;

	if (!(scale >= 0))
		return -EINVAL;
	work_scale = scale;
	for (int i = 0; i < PROMO_RULES; i++) {
		promo_rules[i].sku_hash_mod = (uint32_t)(splitmix(&seed) % 8);
		promo_rules[i].min_qty = (uint32_t)(2 + splitmix(&seed) % 20);
		promo_rules[i].percent = (uint32_t)(1 + splitmix(&seed) % 15);
	}
	for (int i = 0; i < 256; i++)
		tax_bp[i] = (uint16_t)(500 + splitmix(&seed) % 1500);
	for (unsigned i = 0; i < DEMO_SKU_COUNT; i++) {
		struct inventory_entry *e = &inventory[i];

		snprintf(e->sku, sizeof(e->sku), "SKU-%04u", i);
		e->on_hand = (uint32_t)(splitmix(&seed) % 500);
		e->warehouse = (uint32_t)(1 + splitmix(&seed) % 12);
	}
	rsa_key_init(&demo_key, seed);
	return 0;
}
