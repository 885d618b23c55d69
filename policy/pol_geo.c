/*
 * pol_geo.c - GeoIP for `countries:` and `asns:` rules (libmaxminddb).
 *
 * Owns the two databases a config names (geoip.country, geoip.asn), each
 * opened once at load with MMDB_MMAP and closed by pol_config_free().
 * Lookups read the mapping only: no allocation, safe from any thread.
 *
 * Formats understood: MaxMind GeoIP2/GeoLite2 and DB-IP (country.iso_code,
 * else registered_country.iso_code; autonomous_system_number), and the
 * flat layout of ipinfo's files (country: "DE", asn: "AS3320").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <maxminddb.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

struct pol_geo {
	MMDB_s db[2];                   /* by enum pol_geo_db */
	int open[2];
};

/*
 * ISO 3166-1 alpha-2: the 249 assigned codes, then the user-assigned
 * ranges (AA, QM-QZ, XA-XZ, ZZ) that databases use for their own
 * purposes (MaxMind's XK for Kosovo, test databases).
 */
static const char iso3166[] =
	"AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ "
	"BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ "
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ "
	"DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR "
	"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY "
	"HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP "
	"KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY "
	"MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ "
	"NA NC NE NF NG NI NL NO NP NR NU NZ OM "
	"PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW "
	"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ "
	"TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ "
	"VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW";

uint32_t pol_geo_country_code(const char *s)
{
	char a, b;
	size_t i;

	if (strlen(s) != 2)
		return 0;
	a = (char)(s[0] & ~0x20);
	b = (char)(s[1] & ~0x20);
	if (a < 'A' || a > 'Z' || b < 'A' || b > 'Z')
		return 0;
	if ((a == 'A' && b == 'A') || (a == 'Q' && b >= 'M') || a == 'X' ||
	    (a == 'Z' && b == 'Z'))
		return (uint32_t)a << 8 | (uint32_t)b;
	for (i = 0; i + 1 < sizeof(iso3166); i += 3)
		if (iso3166[i] == a && iso3166[i + 1] == b)
			return (uint32_t)a << 8 | (uint32_t)b;
	return 0;
}

/* Case-insensitive substring: database_type words vary in case. */
static int type_has(const char *type, const char *word)
{
	size_t n = strlen(word), i;

	for (i = 0; type[i]; i++)
		if (sg_strncaseeq(type + i, word, n))
			return 1;
	return 0;
}

/*
 * A country slot holding an ASN file (or the other way round) would make
 * every lookup come back empty and every rule silently not match: check
 * the type the file declares.
 */
static int geo_type_ok(enum pol_geo_db which, const char *type)
{
	if (type_has(type, "enterprise"))
		return 1;
	if (which == POL_GEO_COUNTRY)
		return type_has(type, "country") || type_has(type, "city");
	return type_has(type, "asn") || type_has(type, "isp");
}

int pol_geo_open(struct pol_geo **gp, enum pol_geo_db which, const char *path,
		 char *err, size_t errsz)
{
	struct pol_geo *g = *gp;
	MMDB_lookup_result_s r;
	struct sockaddr_storage ss;
	struct sg_addr probe;
	const char *type;
	int rc, merr;

	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g)
			return SG_ENOMEM;
		*gp = g;
	}
	errno = 0;
	rc = MMDB_open(path, MMDB_MODE_MMAP, &g->db[which]);
	if (rc == MMDB_FILE_OPEN_ERROR || rc == MMDB_IO_ERROR) {
		snprintf(err, errsz, "cannot open %s: %s", path,
			 errno ? strerror(errno) : MMDB_strerror(rc));
		return SG_EIO;
	}
	if (rc == MMDB_OUT_OF_MEMORY_ERROR)
		return SG_ENOMEM;
	if (rc != MMDB_SUCCESS) {
		snprintf(err, errsz, "%s is not a readable MaxMind DB file: %s", path,
			 MMDB_strerror(rc));
		return SG_EINVAL;
	}
	g->open[which] = 1;
	type = g->db[which].metadata.database_type;
	if (!type || !geo_type_ok(which, type)) {
		snprintf(err, errsz, "%s: database type \"%s\" is not %s database", path,
			 type ? type : "", which == POL_GEO_COUNTRY ?
			 "a country (or city)" : "an ASN (or ISP)");
		return SG_EINVAL;
	}
	/* Walk the search tree once: a file cut short or scrambled past its
	 * metadata fails here rather than on a connection. */
	memset(&probe, 0, sizeof(probe));
	probe.family = g->db[which].metadata.ip_version == 6 ? AF_INET6 : AF_INET;
	sg_addr_to_sa(&probe, 0, &ss);
	r = MMDB_lookup_sockaddr(&g->db[which], (struct sockaddr *)&ss, &merr);
	SG_UNUSED(r);
	if (merr != MMDB_SUCCESS) {
		snprintf(err, errsz, "%s is corrupt: %s", path, MMDB_strerror(merr));
		return SG_EINVAL;
	}
	return 0;
}

void pol_geo_free(struct pol_geo *g)
{
	int i;

	if (!g)
		return;
	for (i = 0; i < 2; i++)
		if (g->open[i])
			MMDB_close(&g->db[i]);
	free(g);
}

/* A string value of exactly two letters at path, as a country code. */
static uint32_t geo_cc(MMDB_entry_s *e, const char *const *path)
{
	MMDB_entry_data_s d;
	char cc[3];

	if (MMDB_aget_value(e, &d, path) != MMDB_SUCCESS || !d.has_data ||
	    d.type != MMDB_DATA_TYPE_UTF8_STRING || d.data_size != 2)
		return 0;
	memcpy(cc, d.utf8_string, 2);
	cc[2] = '\0';
	return pol_geo_country_code(cc);
}

static uint32_t geo_asn(MMDB_entry_s *e)
{
	static const char *const num[] = { "autonomous_system_number", NULL };
	static const char *const str[] = { "asn", NULL };
	MMDB_entry_data_s d;
	char buf[16];
	long long v;

	if (MMDB_aget_value(e, &d, num) == MMDB_SUCCESS && d.has_data) {
		switch (d.type) {
		case MMDB_DATA_TYPE_UINT16:
			return d.uint16;
		case MMDB_DATA_TYPE_UINT32:
			return d.uint32;
		case MMDB_DATA_TYPE_UINT64:
			return d.uint64 <= UINT32_MAX ? (uint32_t)d.uint64 : 0;
		case MMDB_DATA_TYPE_INT32:
			return d.int32 > 0 ? (uint32_t)d.int32 : 0;
		default:
			return 0;
		}
	}
	/* "AS3320" */
	if (MMDB_aget_value(e, &d, str) != MMDB_SUCCESS || !d.has_data ||
	    d.type != MMDB_DATA_TYPE_UTF8_STRING || d.data_size < 3 ||
	    d.data_size >= sizeof(buf) || !sg_strncaseeq(d.utf8_string, "AS", 2))
		return 0;
	memcpy(buf, d.utf8_string + 2, d.data_size - 2);
	buf[d.data_size - 2] = '\0';
	if (strspn(buf, "0123456789") != strlen(buf) ||
	    sg_int_parse(buf, 1, 4294967294LL, &v))
		return 0;
	return (uint32_t)v;
}

static int geo_entry(const struct pol_geo *g, enum pol_geo_db which,
		     const struct sockaddr *sa, MMDB_entry_s *e)
{
	MMDB_lookup_result_s r;
	int merr;

	if (!g || !g->open[which])
		return 0;
	r = MMDB_lookup_sockaddr(&g->db[which], sa, &merr);
	if (merr != MMDB_SUCCESS || !r.found_entry)
		return 0;
	*e = r.entry;
	return 1;
}

void pol_geo_find(const struct pol_geo *g, const struct sg_addr *a,
		  uint32_t *cc, uint32_t *asn)
{
	static const char *const country[] = { "country", "iso_code", NULL };
	static const char *const registered[] = { "registered_country", "iso_code", NULL };
	static const char *const flat[] = { "country", NULL };
	struct sockaddr_storage ss;
	struct sg_addr v4;
	MMDB_entry_s e;

	*cc = *asn = 0;
	/* A mapped address is an IPv4 one (an unfolded caller's). */
	if (a->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->u.v6)) {
		memset(&v4, 0, sizeof(v4));
		v4.family = AF_INET;
		memcpy(&v4.u.v4, &a->u.v6.s6_addr[12], 4);
		a = &v4;
	}
	sg_addr_to_sa(a, 0, &ss);
	if (geo_entry(g, POL_GEO_COUNTRY, (struct sockaddr *)&ss, &e)) {
		*cc = geo_cc(&e, country);
		if (!*cc)
			*cc = geo_cc(&e, registered);
		if (!*cc)
			*cc = geo_cc(&e, flat);
	}
	if (geo_entry(g, POL_GEO_ASN, (struct sockaddr *)&ss, &e))
		*asn = geo_asn(&e);
}

void pol_geo_lookup(const struct sg_config *cfg, const struct sg_addr *a,
		    struct pol_geo_info *gi)
{
	uint32_t cc, asn;

	memset(gi, 0, sizeof(*gi));
	pol_geo_find(cfg->geo, a, &cc, &asn);
	if (cc) {
		gi->country[0] = (char)(cc >> 8);
		gi->country[1] = (char)(cc & 0xff);
	}
	gi->asn = asn;
}
