/* The reference library's answers (CTSRD-CHERI/cheri-compressed-cap), one
 * JSON line per input line, for scripts/cheri-reference to set beside
 * `retype cheri`'s. Built once per format with
 *   -DHEADER='"cheri_compressed_cap_128m.h"' -DPREFIX=cc128m -DFORMAT='"morello"'
 * (128 for rv64, 64 for rv32).
 *
 *   reference setbounds   reads `BASE LENGTH` lines: the root capability at
 *                         BASE, its bounds set to LENGTH (cheri_setbounds),
 *                         whether it keeps its tag, CRRL and CRAM of LENGTH
 *   reference decode      reads `PESBT CURSOR` lines: the fields they decode
 *                         to, untagged
 * Numbers are read in decimal or 0x-hex and written in decimal. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cheri_compressed_cap.h"

#define JOIN2(a, b) a##_##b
#define JOIN(a, b) JOIN2(a, b)
#define F(name) JOIN(PREFIX, name)

typedef F(addr_t) addr_t;
typedef F(length_t) length_t;
typedef F(cap_t) cap_t;

/* The address width in bits: 64, or 32 for CC64. */
#define WIDTH (8 * (int)sizeof(addr_t))

static unsigned __int128 parse(const char *text, int line) {
    unsigned __int128 value = 0;
    int base = 10;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text += 2;
    }
    if (!*text) goto bad;
    for (; *text; text++) {
        int digit;
        if (*text >= '0' && *text <= '9') digit = *text - '0';
        else if (base == 16 && *text >= 'a' && *text <= 'f') digit = *text - 'a' + 10;
        else if (base == 16 && *text >= 'A' && *text <= 'F') digit = *text - 'A' + 10;
        else goto bad;
        value = value * base + digit;
    }
    return value;
bad:
    fprintf(stderr, "reference: line %d: not a number\n", line);
    exit(2);
}

static const char *decimal(unsigned __int128 value, char *buffer) {
    char *p = buffer + 40;
    *p = 0;
    do {
        *--p = (char)('0' + (int)(value % 10));
        value /= 10;
    } while (value);
    return p;
}

/* Two numbers a line; returns 0 at the end of the input. */
static int read_pair(unsigned __int128 *a, unsigned __int128 *b, int *line) {
    char text[256], first[128], second[128];
    while (fgets(text, sizeof text, stdin)) {
        ++*line;
        if (sscanf(text, "%127s %127s", first, second) == 2) {
            *a = parse(first, *line);
            *b = parse(second, *line);
            return 1;
        }
    }
    return 0;
}

static void setbounds(void) {
    unsigned __int128 base, length;
    int line = 0;
    char b[6][41];
    const unsigned __int128 space = (unsigned __int128)1 << WIDTH;
    while (read_pair(&base, &length, &line)) {
        if (base >= space || base + length > space) {
            fprintf(stderr, "reference: line %d: outside the %d-bit address space\n", line, WIDTH);
            exit(2);
        }
        cap_t cap = F(make_max_perms_cap)(0, (addr_t)base, (length_t)1 << WIDTH);
        int exact = F(setbounds)(&cap, (length_t)length);
        printf("{\"format\":\"%s\",\"base\":%s,\"top\":%s,\"length\":%s,\"exact\":%s", FORMAT,
               decimal(cap.cr_base, b[0]), decimal(cap._cr_top, b[1]),
               decimal(cap._cr_top - cap.cr_base, b[2]), exact ? "true" : "false");
        /* CRRL and CRAM take an address-wide length: 2^WIDTH has no answer. */
        if (length < space) {
            addr_t mask = F(get_alignment_mask)((addr_t)length);
            unsigned __int128 crrl = F(get_representable_length)((addr_t)length);
            if (crrl == 0 && length != 0) crrl = space; /* the library's wrap to 0 */
            printf(",\"crrl\":%s,\"cram\":%s", decimal(crrl, b[3]), decimal(mask, b[4]));
        }
        printf(",\"pesbt\":%s,\"tag\":%s}\n", decimal(F(compress_raw)(&cap), b[5]),
               cap.cr_tag ? "true" : "false");
    }
}

/* The flags: ISAv9's flag bit. Morello's are the address's top byte, which
 * the library does not keep (its FLAGS field is empty, and
 * cheri_compressed_cap_128m.h says it "should really be" bits 63..56): with
 * -DTOP_BYTE_FLAGS they are read from the address as Morello defines them. */
static unsigned flags(const cap_t *cap) {
#ifdef TOP_BYTE_FLAGS
    return (unsigned)(cap->_cr_cursor >> 56);
#else
    return (unsigned)F(get_flags)(cap);
#endif
}

static void decode(void) {
    unsigned __int128 pesbt, cursor;
    int line = 0;
    char b[4][41];
    while (read_pair(&pesbt, &cursor, &line)) {
        cap_t cap;
        F(decompress_raw)((addr_t)pesbt, (addr_t)cursor, 0, &cap);
        printf("{\"format\":\"%s\",\"pesbt\":%s,\"address\":%s,\"base\":%s,\"top\":%s,"
               "\"exponent\":%u,\"bounds_valid\":%s,\"otype\":%" PRIu32 ",\"flags\":%u}\n",
               FORMAT, decimal(pesbt, b[0]), decimal(cap._cr_cursor, b[1]), decimal(cap.cr_base, b[2]),
               decimal(cap._cr_top, b[3]), (unsigned)cap.cr_exp, cap.cr_bounds_valid ? "true" : "false",
               F(get_otype)(&cap), flags(&cap));
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "setbounds") == 0) setbounds();
    else if (argc == 2 && strcmp(argv[1], "decode") == 0) decode();
    else {
        fprintf(stderr, "usage: reference setbounds|decode < LINES\n");
        return 2;
    }
    return 0;
}
