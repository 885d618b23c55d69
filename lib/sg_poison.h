/* Included last, after every system header: bans the unbounded string calls. */
#ifndef SG_POISON_H
#define SG_POISON_H
#if defined(__GNUC__)
#pragma GCC poison sprintf strcpy strcat vsprintf gets
#endif
#endif
