/*
 * aud_cmd.h - the `sandgate audit` subcommands, called from gateway/main.c.
 *
 * argv[0] is the first argument after the subcommand word: for
 * `sandgate audit query --json f`, argc = 2 and argv = {"--json", "f"}.
 * Each returns the process exit code: 0 ok, 1 the job failed (tampered,
 * invalid records, unreadable files), 2 usage.
 */
#ifndef AUD_CMD_H
#define AUD_CMD_H

int aud_cmd_verify(int argc, char **argv);
int aud_cmd_query(int argc, char **argv);
int aud_cmd_report(int argc, char **argv);

#endif
