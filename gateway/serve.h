/* serve.h - `sandgate serve`. Returns the process exit code. */
#ifndef GW_SERVE_H
#define GW_SERVE_H

int gw_serve(const char *config_path, int check_only);

#endif
