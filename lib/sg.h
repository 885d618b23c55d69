/*
 * sg.h - the small shared base every module includes.
 *
 * Owns nothing. Provides: return codes, container_of, the bounds-checked
 * read cursor used by every wire parser, and the poison list. No module
 * below lib/ may be included from here.
 */
#ifndef SG_H
#define SG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SG_OK        0
#define SG_AGAIN    (-1)   /* parser: need more bytes */
#define SG_DECLINED (-2)   /* parser: not this protocol */
#define SG_ERROR    (-3)   /* parser: this protocol, but malformed */
#define SG_ENOMEM   (-4)
#define SG_EINVAL   (-5)
#define SG_EIO      (-6)

#define SG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define sg_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#define SG_UNUSED(x) ((void)(x))

/*
 * Bounds-checked read cursor (c-ares ares_buf style). Every read either
 * succeeds and advances, or fails and marks the cursor short, leaving it
 * where it was. Parsers read through it and check rd->short_ once at a
 * natural boundary instead of scattering "pos + n > len" tests.
 */
struct sg_rd {
	const uint8_t *p;       /* borrowed */
	size_t len;
	size_t off;
	int short_;             /* a read ran past the end */
};

static inline void sg_rd_init(struct sg_rd *rd, const uint8_t *p, size_t len)
{
	rd->p = p;
	rd->len = len;
	rd->off = 0;
	rd->short_ = 0;
}

static inline size_t sg_rd_left(const struct sg_rd *rd)
{
	return rd->len - rd->off;
}

static inline int sg_rd_need(struct sg_rd *rd, size_t n)
{
	if (rd->short_ || sg_rd_left(rd) < n) {
		rd->short_ = 1;
		return 0;
	}
	return 1;
}

static inline uint8_t sg_rd_u8(struct sg_rd *rd)
{
	if (!sg_rd_need(rd, 1))
		return 0;
	return rd->p[rd->off++];
}

static inline uint16_t sg_rd_u16be(struct sg_rd *rd)
{
	uint16_t v;

	if (!sg_rd_need(rd, 2))
		return 0;
	v = (uint16_t)(rd->p[rd->off] << 8 | rd->p[rd->off + 1]);
	rd->off += 2;
	return v;
}

static inline uint32_t sg_rd_u24be(struct sg_rd *rd)
{
	uint32_t v;

	if (!sg_rd_need(rd, 3))
		return 0;
	v = (uint32_t)rd->p[rd->off] << 16 | (uint32_t)rd->p[rd->off + 1] << 8 |
	    rd->p[rd->off + 2];
	rd->off += 3;
	return v;
}

static inline uint32_t sg_rd_u32be(struct sg_rd *rd)
{
	uint32_t hi = sg_rd_u16be(rd);

	return hi << 16 | sg_rd_u16be(rd);
}

/* Skip n bytes. */
static inline void sg_rd_skip(struct sg_rd *rd, size_t n)
{
	if (sg_rd_need(rd, n))
		rd->off += n;
}

/* Take n bytes as a sub-cursor; the parent advances past them. */
static inline struct sg_rd sg_rd_sub(struct sg_rd *rd, size_t n)
{
	struct sg_rd sub;

	if (!sg_rd_need(rd, n)) {
		sg_rd_init(&sub, NULL, 0);
		sub.short_ = 1;
		return sub;
	}
	sg_rd_init(&sub, rd->p + rd->off, n);
	rd->off += n;
	return sub;
}

/* Length-prefixed vectors (TLS "opaque x<0..2^8-1>" and friends). */
static inline struct sg_rd sg_rd_vec8(struct sg_rd *rd)
{
	size_t n = sg_rd_u8(rd);

	return sg_rd_sub(rd, rd->short_ ? (size_t)-1 : n);
}

static inline struct sg_rd sg_rd_vec16(struct sg_rd *rd)
{
	size_t n = sg_rd_u16be(rd);

	return sg_rd_sub(rd, rd->short_ ? (size_t)-1 : n);
}

static inline struct sg_rd sg_rd_vec24(struct sg_rd *rd)
{
	size_t n = sg_rd_u24be(rd);

	return sg_rd_sub(rd, rd->short_ ? (size_t)-1 : n);
}

#endif
