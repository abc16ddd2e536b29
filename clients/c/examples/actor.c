/* actor.c - replayd-actor: an Ape-X style actor on CartPole-v1 that streams
 * its transitions to a replayd workload.
 *
 *   replayd-actor --register [--capacity N] [--name NAME]
 *   replayd-actor --workload ID --token T [--steps N] [--batch B] [--epsilon E]
 *
 * There are no trained weights yet (hosted learning comes later), so the
 * policy is epsilon-greedy around a fixed heuristic (cartpole.h): with
 * probability epsilon a random action, else push toward the pole's lean.
 * --epsilon 1 is a uniformly random actor.
 *
 * Transitions are collected B at a time into one column buffer per field
 * and sent as one message of the Insert stream; the stream keeps one
 * message in flight, so stepping the environment overlaps with sending.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cartpole.h"
#include "cartpole_schema.h"
#include "example_args.h"
#include "replayd_client.h"

static const char *prog = "replayd-actor";

static void usage(FILE *f) {
  fprintf(f,
          "usage: replayd-actor [OPTIONS]\n"
          "\n"
          "Play CartPole-v1 and stream the transitions to a replayd workload.\n"
          "\n"
          "  --server HOST:PORT  server (default $REPLAYD_SERVER, else 127.0.0.1:50051)\n"
          "  --register          register a new CartPole workload, print its id and token\n"
          "                      (then stream into it unless --steps 0)\n"
          "  --name NAME         with --register: the workload's label (default cartpole)\n"
          "  --capacity N        with --register: items the table holds (default 100000)\n"
          "  --workload ID       stream into this workload (default $REPLAYD_WORKLOAD)\n"
          "  --token T           its token (default $REPLAYD_TOKEN)\n"
          "  --steps N           environment steps to take (default 100000)\n"
          "  --batch B           transitions per stream message (default 256)\n"
          "  --epsilon E         probability of a random action (default 0.1)\n"
          "  --seed S            environment and policy seed (default 1)\n"
          "  --timeout S         connect timeout and per-call deadline (default 10)\n"
          "  --wait              wait for the server: at start (until --timeout) and\n"
          "                      whenever it restarts, instead of failing at once\n"
          "  -h, --help          this text\n");
}

int main(int argc, char **argv) {
  ex_conn_t conn;
  ex_conn_init(&conn);
  const char *name = "cartpole";
  int do_register = 0;
  uint64_t steps = 100000, batch = 256, capacity = 100000, seed = 1;
  double epsilon = 0.1;

  for (int i = 1; i < argc; i++) {
    const char *v;
    if (ex_common_opt(&conn, 1, argc, argv, &i, usage, prog)) {
      continue;
    } else if (strcmp(argv[i], "--register") == 0) {
      do_register = 1;
    } else if ((v = ex_opt(argc, argv, &i, "--name", prog))) {
      name = v;
    } else if ((v = ex_opt(argc, argv, &i, "--capacity", prog))) {
      capacity = ex_u64(v, "--capacity", 1, UINT32_MAX, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--steps", prog))) {
      steps = ex_u64(v, "--steps", 0, UINT64_MAX, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--batch", prog))) {
      batch = ex_u64(v, "--batch", 1, 1u << 20, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--epsilon", prog))) {
      epsilon = ex_double(v, "--epsilon", 0, 1, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--seed", prog))) {
      seed = ex_u64(v, "--seed", 0, UINT64_MAX, prog);
    } else {
      ex_usage_exit(prog, "unknown argument ", argv[i]);
    }
  }
  if (!do_register && (conn.workload == NULL || conn.token == NULL))
    ex_usage_exit(prog, "give --workload ID --token T (or $REPLAYD_WORKLOAD, $REPLAYD_TOKEN), "
                        "or --register", "");

  rdc_client_t *c;
  rdc_error_t e;
  if (ex_connect(&conn, &c, &e) != RDC_OK) return ex_fail(prog, NULL, &e);

  /* A workload either registered here or checked to have our schema, so a
   * mismatch fails now with a clear message rather than on every batch. */
  rdc_workload_t *wl = malloc(sizeof *wl);
  if (wl == NULL) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  if (do_register) {
    rdc_spec_t spec;
    rdc_spec_init(&spec);
    snprintf(spec.name, sizeof spec.name, "%s", name);
    spec.n_fields = CP_N_FIELDS;
    cartpole_fields(spec.fields);
    spec.capacity = (uint32_t)capacity;
    spec.seed = seed;
    if (rdc_register(c, &spec, wl, &e) != RDC_OK) return ex_fail(prog, NULL, &e);
    printf("registered workload %s (%s, capacity %" PRIu32 ")\n", wl->id, wl->spec.name,
           wl->spec.capacity);
    printf("  --workload %s --token %s\n", wl->id, wl->token);
    printf("  export REPLAYD_WORKLOAD=%s REPLAYD_TOKEN=%s\n", wl->id, wl->token);
    fflush(stdout);
    conn.workload = wl->id;
    conn.token = wl->token;
  } else if (ex_cartpole_workload(c, conn.workload, wl, prog) != 0) {
    return 1;
  }
  if (steps == 0) {
    rdc_close(c);
    free(wl);
    return 0;
  }

  /* One column buffer per field, B rows each. */
  size_t b = (size_t)batch;
  float *obs = malloc(b * 4 * sizeof(float));
  int32_t *action = malloc(b * sizeof(int32_t));
  float *reward = malloc(b * sizeof(float));
  float *next_obs = malloc(b * 4 * sizeof(float));
  uint8_t *done = malloc(b);
  if (!obs || !action || !reward || !next_obs || !done) {
    fprintf(stderr, "%s: out of memory for a batch of %zu\n", prog, b);
    return 1;
  }

  rdc_insert_stream_t *st;
  if (rdc_insert_stream_open(c, conn.workload, conn.token, &st, &e) != RDC_OK)
    return ex_fail(prog, NULL, &e);

  cartpole_t env;
  cartpole_seed(&env, seed);
  cp_rng_t policy_rng;
  cp_rng_seed(&policy_rng, seed ^ 0x5eed5eed5eed5eedull);
  float o[4];
  cartpole_reset(&env, o);
  uint64_t episodes = 0, episode_steps_total = 0, messages = 0;
  size_t fill = 0;
  double t0 = rd_clock_now();
  int rc = 0;
  for (uint64_t s = 0; s < steps; s++) {
    int a = cp_rng_uniform(&policy_rng) < epsilon ? (int)(cp_rng_next(&policy_rng) >> 63)
                                                  : cartpole_heuristic_action(o);
    float next[4], r;
    int term, trunc;
    cartpole_step(&env, a, next, &r, &term, &trunc);
    memcpy(&obs[fill * 4], o, sizeof o);
    action[fill] = a;
    reward[fill] = r;
    memcpy(&next_obs[fill * 4], next, sizeof next);
    done[fill] = (uint8_t)term;
    fill++;
    if (term || trunc) {
      episodes++;
      episode_steps_total += env.steps;
      cartpole_reset(&env, o);
    } else {
      memcpy(o, next, sizeof o);
    }
    if (fill == b || s + 1 == steps) {
      rdc_column_t cols[CP_N_FIELDS] = {
          {obs, fill * 4 * sizeof(float)}, {action, fill * sizeof(int32_t)},
          {reward, fill * sizeof(float)},  {next_obs, fill * 4 * sizeof(float)},
          {done, fill},
      };
      if (rdc_insert_stream_write(st, (uint32_t)fill, cols, CP_N_FIELDS, NULL, &e) != RDC_OK) {
        rc = ex_fail(prog, NULL, &e);
        break;
      }
      messages++;
      fill = 0;
    }
  }
  uint64_t inserted = 0, first_key = 0;
  if (rc == 0) {
    if (rdc_insert_stream_close(st, &inserted, &first_key, &e) != RDC_OK)
      rc = ex_fail(prog, NULL, &e);
  } else {
    rdc_insert_stream_cancel(st);
  }
  double dt = rd_clock_now() - t0;
  if (rc == 0) {
    printf("streamed %" PRIu64 " transitions in %.3f s: %.0f transitions/s (%" PRIu64
           " messages of up to %zu)\n",
           steps, dt, dt > 0 ? (double)steps / dt : 0.0, messages, b);
    printf("server inserted %" PRIu64 " rows, first key %" PRIu64 "\n", inserted, first_key);
    if (episodes > 0)
      printf("%" PRIu64 " episodes finished, mean length %.1f (epsilon %g)\n", episodes,
             (double)episode_steps_total / (double)episodes, epsilon);
  }
  free(obs);
  free(action);
  free(reward);
  free(next_obs);
  free(done);
  free(wl);
  rdc_close(c);
  return rc;
}
