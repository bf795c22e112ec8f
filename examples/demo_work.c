/*
 * demo_work.c - the CPU work of the demo service (see demo_work.h).
 *
 * Each business function repeats its real work until the thread's CPU
 * budget is spent. The thread CPU clock is a system call, so it is read
 * about every 20 us of work only (budget_more). Business functions are
 * NOINLINE, so each is a frame of its own under its own name; what they
 * call is ordinary: libc (memcpy, memcmp, snprintf, bsearch, strncmp,
 * qsort) and, for the slow tail, OpenSSL's libcrypto. The build is a
 * plain -O2 one, without frame pointers (docs/demo.md).
 *
 * The slow tail is RSA signature verification through libcrypto's EVP
 * API: each round hashes the signed authorisation with SHA-256 and
 * verifies the payment gateway's RSA-2048 signature of it (PKCS#1 v1.5),
 * so its CPU is in libcrypto's SHA-256 and, mostly, its Montgomery
 * multiplication (under BN_mod_exp_mont).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "demo_work.h"
#include "traceprof/hex.h"

/*
 * Kept as its own frame under its own name: GCC's noipa also stops the
 * constprop/isra clones whose names (parseOrder.constprop.0) a profile would
 * show instead.
 */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa))
#endif
/* Small helpers folded into the business function that calls them. */
#define ALWAYS_INLINE	  inline __attribute__((always_inline))
#define CLOCK_INTERVAL_NS 20000 /* least CPU time between two clock reads */
#define SHA256_LEN	  32	/* bytes of a SHA-256 digest */
#define PROMO_RULES	  64	/* volume discount rules computeTotal scans */
#define LOW_STOCK	  64	/* entries of refreshCache's low-stock report */

struct cpu_budget {
	int64_t end_ns;	 /* thread CPU time at which the budget is spent */
	int64_t last_ns; /* thread CPU time at the last clock read */
	unsigned rounds; /* rounds since the last clock read */
	unsigned batch;	 /* rounds between clock reads */
	bool zero;	 /* work scale 0: one round only */
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
static EVP_PKEY *gateway_key;	       /* the gateway's public key */
static EVP_MD *sha256;		       /* SHA-256, fetched once */
static unsigned char gateway_sig[256]; /* its signature of gateway_message */
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

/* ---- the signature ---- */

/*
 * The payment gateway's RSA-2048 public key and its signature (PKCS#1
 * v1.5, SHA-256) of the authorisation below. The private half was thrown
 * away once the signature was made: the demo verifies, as a payment
 * service does, and signs nothing.
 */
static const char gateway_key_pem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAv16MSxP0IUEXW9+LM/Bl\n"
    "LMUYqJ87YRLCqXaADdjGZ/N4jn4LQHUFLqObF5c+CpSsqKTaUtwBC4zyFsApbwrj\n"
    "mvFuyl87JpTi36rFvZUeAGOLPTACaaL0ItXsj5tKYuRExYw7/zl2M3qzPJIVCYZA\n"
    "2CyFZ9VVne0AWPTlDVfMAnKx/dHicY06BlyP2Y/miJonieduooOJbrSTfRBVxCoG\n"
    "cMoKqn9eMn+QL/8zdLfK/6dfNly66Wl9drRp/WYmXs8HUyQSvuWRWKc4Fyqvp35Q\n"
    "gs+XaBGTuxKJNJX2xH4tbHFodo/faEo+a6p2KHEMJltTUam9SnCkkKXJQ6CSGXqQ\n"
    "MwIDAQAB\n"
    "-----END PUBLIC KEY-----\n";
static const char gateway_message[] = "traceprof demo: payment gateway order authorisation";
static const char gateway_sig_hex[] =
    "282e153265d7dbac80c53cd3b8d8fe67f00e00847a59a15b78d31a4eeaab4e54"
    "d98bbf41237fba1e5d05f7cd47052f7e89c555695b0d30ee4cedf2f6d25a1443"
    "79b3d3ddafe3c6edfe699c62a05b5dba8dd8d199898512b7b089f70321e90952"
    "a07617a3401d0f0deeff7888dfd459baa0a4f360e8e8d5bb3f5ba8ebfd3f37e4"
    "73a8644a88ca9ce02e05b0d94c1caeea7f0b35e64528429998b05b90f6d05414"
    "e92300f3de073e5c71f99acf6d2c91eb6cfe1e6fc61e61cde2935bbe3fb4a8a2"
    "b4fdf69e1bf61ced86d0f66276746d204024eb2c29e6e7ca9d3ad5304c06471c"
    "8a41462fbeed2a90183943a917e75296d87457eb37417d08255a3c1febd14d74";

/* Loads the gateway's key and signature once. Returns 0 or -EIO. */
static int gateway_load(void)
{
	BIO *bio;

	if (gateway_key)
		return 0;
	if (tp_hex_decode(gateway_sig_hex, gateway_sig, sizeof(gateway_sig), true))
		return -EIO;
	sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	bio = BIO_new_mem_buf(gateway_key_pem, sizeof(gateway_key_pem) - 1);
	if (bio)
		gateway_key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	return sha256 && gateway_key ? 0 : -EIO;
}

/* A verifier of the gateway's signatures for the calling thread, or NULL. */
static EVP_PKEY_CTX *verifier_new(void)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, gateway_key, NULL);

	if (ctx && EVP_PKEY_verify_init(ctx) == 1 &&
	    EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 &&
	    EVP_PKEY_CTX_set_signature_md(ctx, sha256) == 1)
		return ctx;
	EVP_PKEY_CTX_free(ctx);
	return NULL;
}

/* SHA-256 of len bytes at data into md. Returns 0 or -EIO. */
static int sha256_of(EVP_MD_CTX *mdctx, const void *data, size_t len, unsigned char *md)
{
	unsigned int md_len = 0;

	if (EVP_DigestInit_ex2(mdctx, sha256, NULL) != 1 ||
	    EVP_DigestUpdate(mdctx, data, len) != 1 ||
	    EVP_DigestFinal_ex(mdctx, md, &md_len) != 1 || md_len != SHA256_LEN)
		return -EIO;
	return 0;
}

/* The RSA verification itself, in libcrypto: 0 or -EBADMSG. */
static NOINLINE int rsa_verify(EVP_PKEY_CTX *ctx, const unsigned char *sig, size_t sig_len,
			       const unsigned char *md)
{
	return EVP_PKEY_verify(ctx, sig, sig_len, md, SHA256_LEN) == 1 ? 0 : -EBADMSG;
}

int demo_work_self_test(void)
{
	unsigned char md[SHA256_LEN], bad[sizeof(gateway_sig)];
	EVP_MD_CTX *mdctx = EVP_MD_CTX_new();
	EVP_PKEY_CTX *ctx = gateway_key ? verifier_new() : NULL;
	int rc = -EIO;

	/* the gateway's signature verifies; one flipped bit does not */
	memcpy(bad, gateway_sig, sizeof(bad));
	bad[sizeof(bad) / 2] ^= 1;
	if (mdctx && ctx && !sha256_of(mdctx, gateway_message, sizeof(gateway_message) - 1, md) &&
	    !rsa_verify(ctx, gateway_sig, sizeof(gateway_sig), md) &&
	    rsa_verify(ctx, bad, sizeof(bad), md) == -EBADMSG)
		rc = 0;
	EVP_PKEY_CTX_free(ctx);
	EVP_MD_CTX_free(mdctx);
	return rc;
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
	return len == strlen(lit) && !memcmp(s, lit, len);
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
			memcpy(it->sku, s, slen);
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

	snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	out_lit(o, digits);
}

/* Cents as a decimal string, e.g. "12.05". */
static ALWAYS_INLINE void out_money(struct out_buf *o, uint64_t cents)
{
	char money[32];

	snprintf(money, sizeof(money), "\"%llu.%02u\"", (unsigned long long)(cents / 100),
		 (unsigned)(cents % 100));
	out_lit(o, money);
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
	unsigned char order_md[SHA256_LEN], md[SHA256_LEN];
	EVP_MD_CTX *mdctx = EVP_MD_CTX_new();
	EVP_PKEY_CTX *ctx = verifier_new();
	struct cpu_budget b;
	int rc = -EIO;

	/* The order's digest would select the signature of a real order; ours is fixed. */
	if (!mdctx || !ctx ||
	    sha256_of(mdctx, order->items, order->n_items * sizeof(order->items[0]), order_md))
		goto out;
	budget_start(&b, DEMO_VALIDATE_SIGNATURE_MS);
	do {
		rc = sha256_of(mdctx, gateway_message, sizeof(gateway_message) - 1, md);
		if (!rc)
			rc = rsa_verify(ctx, gateway_sig, sizeof(gateway_sig), md);
	} while (!rc && budget_more(&b));
out:
	EVP_PKEY_CTX_free(ctx);
	EVP_MD_CTX_free(mdctx);
	return rc;
}

/* ---- inventory ---- */

struct sku_key {
	const char *sku; /* not NUL-terminated */
	size_t len;	 /* bytes at sku, < DEMO_SKU_LEN */
};

static int sku_compare(const void *key, const void *entry)
{
	const struct sku_key *k = key;
	const struct inventory_entry *e = entry;
	int c = strncmp(k->sku, e->sku, k->len);

	return c ? c : -(e->sku[k->len] != '\0');
}

static ALWAYS_INLINE const struct inventory_entry *inventory_find(const char *sku, size_t len)
{
	struct sku_key key = {sku, len};

	return bsearch(&key, inventory, DEMO_SKU_COUNT, sizeof(inventory[0]), sku_compare);
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

/* Inventory entries by units on hand, fewest first (qsort). */
static int by_stock(const void *a, const void *b)
{
	uint16_t ia = *(const uint16_t *)a, ib = *(const uint16_t *)b;
	uint32_t sa = inventory[ia].on_hand, sb = inventory[ib].on_hand;

	if (sa != sb)
		return sa < sb ? -1 : 1;
	return (int)ia - (int)ib;
}

/* Rebuilds the inventory checksum and the low-stock report (the LOW_STOCK emptiest SKUs). */
NOINLINE int refreshCache(void)
{
	uint16_t by_units[DEMO_SKU_COUNT];
	struct cpu_budget b;

	budget_start(&b, DEMO_REFRESH_CACHE_MS);
	do {
		uint64_t all = 0;

		for (size_t i = 0; i < DEMO_SKU_COUNT; i++) {
			const struct inventory_entry *e = &inventory[i];
			uint32_t h = fnv1a(e->sku, sizeof(e->sku), 2166136261u);

			h = fnv1a(&e->on_hand, sizeof(e->on_hand), h);
			all ^= ((uint64_t)h << 32 | e->warehouse) * (i + 1);
			by_units[i] = (uint16_t)i;
		}
		qsort(by_units, DEMO_SKU_COUNT, sizeof(by_units[0]), by_stock);
		for (size_t i = 0; i < LOW_STOCK; i++)
			all += inventory[by_units[i]].on_hand;
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
	demo_ledger_init(scale);
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
	return gateway_load();
}
