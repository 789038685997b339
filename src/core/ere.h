/* SPDX-License-Identifier: Apache-2.0 */
/* POSIX extended regular expressions for the patterns an operator writes
 * in the config (tenant.header_pattern, models.pattern), matched against
 * a whole value, in time linear in the value and in the pattern.
 *
 * Why not regcomp: glibc's matcher backtracks on back-references (a
 * pattern with \1 made 8 tenant values cost 11.7 s of the main thread),
 * and its compiler expands counted repetitions into an automaton whose
 * closures grow with the square of the expansion ("((((a{30}){30}){30}){30}){10}"
 * took 6.9 s and 1.7 GB at -t, "(a?){5000}" 1.3 s and 675 MB, then 16 s
 * to match 1 KiB). Here the pattern compiles to at most ERE_MAX_INST
 * instructions (a Thompson automaton, repetitions counted out) and a
 * match steps every instruction at most once per byte of the value: no
 * backtracking, no automaton built at match time, nothing that grows
 * with the text. Back-references, which no linear matcher can have, are
 * refused, as are PCRE habits that POSIX reads as something else (\d is
 * "d" to glibc).
 *
 * The syntax is glibc's REG_EXTENDED in the C locale (bytes): | ( ) . [ ]
 * with classes [:alpha:] and the rest, [=c=] and [.c.] of one character,
 * * + ? {m} {m,} {,n} {m,n} (n <= ERE_DUP_MAX), ^ $ anywhere, and GNU's
 * \w \W \s \S \b \B \< \> \` \'; a backslash before any other
 * punctuation is that character. A ')' without its '(' is an error (glibc
 * reads it as a character). */
#ifndef TOKENTAP_ERE_H
#define TOKENTAP_ERE_H

#include <stddef.h>
#include <stdint.h>

/* the program's bound, counted out: a match costs at most this many
 * steps per byte of the value */
#define ERE_MAX_INST 4096
#define ERE_DUP_MAX  255   /* POSIX's RE_DUP_MAX floor; glibc allows 32767 */

struct ere_inst;

struct ere {
	struct ere_inst *prog;
	unsigned n;                /* instructions */
	uint8_t (*sets)[32];       /* bracket expressions, bitmaps of bytes */
	unsigned n_sets;
};

/* Compiles pattern; 0, or -1 with why (and where: the byte offset of the
 * trouble in the pattern, 0-based) in err. re is all zero on failure. */
int ere_compile(struct ere *re, const char *pattern, char *err, size_t errlen);
/* 1 when the whole of s[0..len) matches, else 0 (also when memory ran
 * out for a program over ERE_STACK_INST instructions). Safe from any
 * thread: the program is read only. */
int ere_match(const struct ere *re, const char *s, size_t len);
void ere_free(struct ere *re);

#endif
