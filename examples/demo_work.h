/*
 * demo_work.h - the CPU work of the demo service: the functions a profile of
 * it should show, each with a fixed CPU cost.
 *
 * Every business function does its real work (parse, price, encode, verify
 * an RSA-2048 signature with OpenSSL's libcrypto, search a table) and
 * repeats it until the calling thread has spent its CPU budget, measured
 * with the thread's CPU clock: the cost of a request is then the same on
 * any machine and under any load, which lets tests predict how many samples
 * a request gets. Budgets are the DEMO_*_MS constants times the work scale.
 *
 * The business functions carry the camelCase names of the application code
 * that traceprof's synthetic workload models (validateSignature, ...), so a
 * profile of this service and one of that model read alike.
 */
#ifndef TRACEPROF_DEMO_WORK_H
#define TRACEPROF_DEMO_WORK_H

#include <stddef.h>
#include <stdint.h>

/* CPU milliseconds per call at work scale 1. */
#define DEMO_PARSE_ORDER_MS	   0.8
#define DEMO_COMPUTE_TOTAL_MS	   1.2
#define DEMO_SERIALIZE_RESPONSE_MS 1.0
#define DEMO_VALIDATE_SIGNATURE_MS 400.0
#define DEMO_LOOKUP_INVENTORY_MS   1.0
#define DEMO_CHARGE_CARD_MS	   5.0
#define DEMO_GATEWAY_TIMEOUT_MS	   25.0
#define DEMO_REFRESH_CACHE_MS	   50.0
/* Wall milliseconds of one write of the payment ledger (no CPU: a wait). */
#define DEMO_LEDGER_WRITE_MS 480.0

#define DEMO_MAX_ITEMS 16	/* items in one order */
#define DEMO_SKU_LEN   16	/* bytes of a SKU, NUL included */
#define DEMO_SKU_COUNT 4096	/* SKUs in the inventory table */
#define DEMO_MAX_QTY   1000	/* largest quantity of one item */
#define DEMO_MAX_PRICE 10000000 /* largest price of one item, cents */

struct demo_item {
	char sku[DEMO_SKU_LEN]; /* e.g. "SKU-0042", NUL-terminated */
	uint32_t qty;		/* 1..DEMO_MAX_QTY */
	uint32_t price_cents;	/* unit price, 0..DEMO_MAX_PRICE */
};

struct demo_order {
	struct demo_item items[DEMO_MAX_ITEMS]; /* the order lines */
	size_t n_items;				/* entries used in items */
};

struct demo_total {
	uint64_t subtotal_cents; /* sum of qty * price */
	uint64_t discount_cents; /* volume discounts */
	uint64_t tax_cents;	 /* tax on the discounted amount */
	uint64_t total_cents;	 /* subtotal - discount + tax */
};

struct demo_stock {
	char sku[DEMO_SKU_LEN]; /* the SKU looked up */
	uint32_t on_hand;	/* units in stock */
	uint32_t warehouse;	/* warehouse number holding them */
};

/*
 * Sets the work scale (>= 0; 0 runs each function's work once), builds the
 * shared tables and loads the payment gateway's public key (once). Call
 * before any other function; returns 0, -EINVAL (scale) or -EIO (libcrypto).
 */
int demo_work_init(double scale);

/* CPU time the calling thread has used, in nanoseconds. */
int64_t demo_thread_cpu_ns(void);

/*
 * Parses a JSON order {"items":[{"sku":"SKU-0042","qty":2,"price_cents":1299}]}
 * (keys in any order, unknown keys with string or number values ignored;
 * an empty body is a one-item default order). Returns 0 or -EINVAL.
 */
int parseOrder(const char *body, size_t len, struct demo_order *order);
/* Prices the order: volume discounts and per-SKU tax. Always 0. */
int computeTotal(const struct demo_order *order, struct demo_total *total);
/*
 * Writes the order confirmation as JSON to out (NUL-terminated) and its
 * length to *out_len. Returns 0 or -ENOSPC.
 */
int serializeResponse(const struct demo_order *order, const struct demo_total *total,
		      const char *trace_id_hex, char *out, size_t out_size, size_t *out_len);
/*
 * The slow tail: hashes the order (SHA-256), then hashes the gateway's
 * authorisation and verifies its RSA-2048 signature (PKCS#1 v1.5, through
 * libcrypto's EVP API) as many times as its budget allows. Returns 0,
 * -EBADMSG or -EIO (libcrypto failed).
 */
int validateSignature(const struct demo_order *order);
/* Looks sku up in the inventory table. Returns 0 or -ENOENT. */
int lookupInventory(const char *sku, size_t sku_len, struct demo_stock *stock);
/* The failing payment: builds the gateway request, then times out. Always -ETIMEDOUT. */
int chargeCard(const struct demo_order *order, const struct demo_total *total);
/*
 * Checks that the gateway's signature verifies and that a copy with one
 * bit flipped does not. Returns 0 or -EIO.
 */
int demo_work_self_test(void);

/*
 * The slow path's wait (demo_ledger.c): appends the signed payment to the
 * ledger and waits, off CPU, until the ledger's writer thread has written
 * it: one write of DEMO_LEDGER_WRITE_MS times the work scale, or two when
 * a write was already under way. Returns 0 (at once at work scale 0) or
 * -errno when the writer cannot start.
 */
int ledger_append(const struct demo_order *order, const struct demo_total *total);
/* Sets the ledger's write time from the work scale (demo_work_init calls it). */
void demo_ledger_init(double scale);

/*
 * Background work outside requests: rebuilds the inventory checksum and the
 * low-stock report (qsort). Always 0.
 */
int refreshCache(void);

#endif
