/* A Kafka broker for the e2e tests: librdkafka's mock cluster (rdkafka_mock.h, from Debian's
 * librdkafka-dev), which speaks the real Kafka protocol on 127.0.0.1 to any client (profcol's
 * librdkafka, kafkajs). Not part of profcol.
 *
 *   kafka_mock [--brokers N] [--down] [--serve] [TOPIC:PARTITIONS ...]
 *
 * prints "bootstraps 127.0.0.1:port,..." on stdout once the brokers listen, then reads commands
 * from stdin, one a line, answering each with a line "ok ..." (or "error ..."):
 *
 *   down [ID]               broker ID (default: every broker) closes its connections and refuses
 *                           new ones
 *   up [ID]                 it accepts again
 *   topic NAME PARTITIONS   create a topic
 *   quit                    (or end of input) destroy the cluster and exit 0
 *
 * With --down every broker starts down. With --serve stdin is not read: it serves until SIGTERM
 * or SIGINT (bench/run.sh). Topics a client names are also created on first use, with the mock
 * cluster's default partition count. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int set_state(rd_kafka_mock_cluster_t *mc, int nbrokers, int id, int up, int quiet)
{
    for (int b = 1; b <= nbrokers; b++) {
        if (id >= 0 && b != id) continue;
        rd_kafka_resp_err_t err =
            up ? rd_kafka_mock_broker_set_up(mc, b) : rd_kafka_mock_broker_set_down(mc, b);
        if (err) {
            printf("error broker %d: %s\n", b, rd_kafka_err2str(err));
            return -1;
        }
    }
    if (!quiet) printf("ok %s %d\n", up ? "up" : "down", id);
    return 0;
}

int main(int argc, char **argv)
{
    int nbrokers = 1, down = 0, serve = 0;
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "client.id", "kafka_mock", errstr, sizeof errstr);
    rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "kafka_mock: %s\n", errstr);
        return 1;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--brokers") && i + 1 < argc)
            nbrokers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--down"))
            down = 1;
        else if (!strcmp(argv[i], "--serve"))
            serve = 1;
        else {
            fprintf(stderr,
                    "usage: kafka_mock [--brokers N] [--down] [--serve] [TOPIC:PARTITIONS ...]\n");
            return 2;
        }
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, nbrokers);
    if (!mc) {
        fprintf(stderr, "kafka_mock: could not start the mock cluster\n");
        return 1;
    }
    for (; i < argc; i++) {
        char name[256];
        int parts = 1;
        if (sscanf(argv[i], "%255[^:]:%d", name, &parts) < 1 ||
            rd_kafka_mock_topic_create(mc, name, parts, 1)) {
            fprintf(stderr, "kafka_mock: cannot create topic %s\n", argv[i]);
            return 1;
        }
    }
    if (down && set_state(mc, nbrokers, -1, 0, 1)) return 1;
    printf("bootstraps %s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);

    if (serve) {
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        while (!stop)
            sleep(1); /* a signal ends it early */
    }
    char line[512];
    while (!serve && fgets(line, sizeof line, stdin)) {
        char cmd[32] = "", arg[256] = "";
        int n = 0, id = -1;
        sscanf(line, "%31s %255s %d", cmd, arg, &n);
        if (arg[0]) id = atoi(arg);
        if (!strcmp(cmd, "quit")) break;
        if (!strcmp(cmd, "down") || !strcmp(cmd, "up")) {
            set_state(mc, nbrokers, id, !strcmp(cmd, "up"), 0);
        } else if (!strcmp(cmd, "topic") && arg[0] && n > 0) {
            rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(mc, arg, n, 1);
            if (err)
                printf("error topic %s: %s\n", arg, rd_kafka_err2str(err));
            else
                printf("ok topic %s %d\n", arg, n);
        } else if (cmd[0]) {
            printf("error unknown command %s\n", cmd);
        }
        fflush(stdout);
    }
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
