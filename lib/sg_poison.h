/* Included last, after every system header: bans the unbounded string calls.
 * _FORTIFY_SOURCE may have made some of them macros; we never call them, so
 * dropping those macros before poisoning loses nothing. */
#ifndef SG_POISON_H
#define SG_POISON_H
#if defined(__GNUC__)
#undef sprintf
#undef vsprintf
#undef strcpy
#undef strcat
#undef gets
#pragma GCC poison sprintf strcpy strcat vsprintf gets
#endif
#endif
