/* The one error convention (src/base/err.h): every code has its own name and message, the error
 * object keeps the latest error and, with a list, every issue with its place. */
#include <string.h>

#include "base/err.h"
#include "check.h"

static void test_names_and_messages(void)
{
    const int codes[] = {
#define CODE(name, value, msg) PC_##name,
        PC_ERRNO_MAP(CODE)
#undef CODE
    };
    size_t n = sizeof codes / sizeof codes[0];
    CHECK(n >= 12);
    for (size_t i = 0; i < n; i++) {
        CHECK(codes[i] < 0);
        CHECK(strncmp(pc_err_name(codes[i]), "PC_E", 4) == 0);
        CHECK(strcmp(pc_strerror(codes[i]), "unknown error") != 0);
        for (size_t j = 0; j < i; j++) { /* distinct values, names and messages */
            CHECK(codes[i] != codes[j]);
            CHECK(strcmp(pc_err_name(codes[i]), pc_err_name(codes[j])) != 0);
            CHECK(strcmp(pc_strerror(codes[i]), pc_strerror(codes[j])) != 0);
        }
    }
    CHECK_STR(pc_err_name(PC_OK), "PC_OK");
    CHECK_STR(pc_err_name(PC_EINVAL), "PC_EINVAL");
    CHECK_STR(pc_err_name(-999), "PC_E?");
    CHECK_STR(pc_strerror(PC_E2BIG), "over a size or memory limit");
    CHECK_STR(pc_strerror(7), "unknown error");
    CHECK(pc_err_retryable(PC_EAGAIN) && pc_err_retryable(PC_EBUSY));
    CHECK(!pc_err_retryable(PC_EINVAL) && !pc_err_retryable(PC_OK));
}

static void test_error_object(void)
{
    pc_error e = {0};
    CHECK_EQ_INT(pc_error_count(&e), 0);
    CHECK_EQ_INT(pc_error_set(&e, PC_E2BIG, "body of %d bytes", 42), PC_E2BIG);
    CHECK_EQ_INT(e.code, PC_E2BIG);
    CHECK_STR(e.msg, "body of 42 bytes");
    pc_error_prefix(&e, "%s: ", "pprof");
    CHECK_STR(e.msg, "pprof: body of 42 bytes");
    CHECK_EQ_INT(pc_error_count(&e), 1);
    CHECK_EQ_INT(pc_error_set(NULL, PC_EIO, "nobody listens"), PC_EIO);
    pc_error_clear(&e);
    CHECK_EQ_INT(e.code, PC_OK);
    CHECK_STR(e.msg, "");
}

static void test_issues(void)
{
    pc_error_issues list;
    pc_error e = PC_ERROR_WITH_ISSUES(&list);
    list.n = 0;
    pc_error_issue_add(&e, PC_EINVAL, "a.yaml", 3, "exporters::otlp::endpoint", "missing %s",
                       "port");
    CHECK_STR(e.msg, "a.yaml:3: exporters::otlp::endpoint: missing port");
    pc_error_issue_add(&e, PC_EINVAL, NULL, 0, NULL, "no pipelines");
    CHECK_STR(e.msg, "no pipelines");
    CHECK_EQ_INT(pc_error_count(&e), 2);
    CHECK_STR(list.v[0].file, "a.yaml");
    CHECK_EQ_INT(list.v[0].line, 3);
    CHECK_STR(list.v[0].path, "exporters::otlp::endpoint");
    CHECK_STR(list.v[0].msg, "missing port");
    for (int i = 0; i < PC_ERROR_MAX_ISSUES + 5; i++)
        pc_error_issue_add(&e, PC_EINVAL, "b.yaml", i + 1, "k", "issue %d", i);
    CHECK_EQ_INT(pc_error_count(&e), PC_ERROR_MAX_ISSUES + 7); /* counted beyond what is kept */
    CHECK_STR(list.v[PC_ERROR_MAX_ISSUES - 1].path, "k");
}

static void test_redaction(void)
{
    char s[64];
    snprintf(s, sizeof s, "token abc and abc again");
    pc_redact(s, sizeof s, "abc");
    CHECK_STR(s, "token [REDACTED] and [REDACTED] again");
    snprintf(s, sizeof s, "xyxyxy");
    pc_redact(s, 12, "xy"); /* cut at the room there is, terminated */
    CHECK_STR(s, "[REDACTED]x");
    snprintf(s, sizeof s, "E and RED"); /* a secret inside the mark does not loop */
    pc_redact(s, sizeof s, "E");
    CHECK_STR(s, "[REDACTED] and R[REDACTED]D");
    char u[160];
    snprintf(u, sizeof u, "post http://bob:s3cret@h:1/p failed; https://h2/x, grpc://t@h3");
    pc_redact_userinfo(u, sizeof u);
    CHECK_STR(u, "post http://[REDACTED]@h:1/p failed; https://h2/x, grpc://[REDACTED]@h3");
    pc_redact_userinfo(u, sizeof u); /* again: unchanged */
    CHECK_STR(u, "post http://[REDACTED]@h:1/p failed; https://h2/x, grpc://[REDACTED]@h3");
    snprintf(u, sizeof u, "http://h/p?u=a@b \"x://\"");
    pc_redact_userinfo(u, sizeof u); /* '@' after the authority is not userinfo */
    CHECK_STR(u, "http://h/p?u=a@b \"x://\"");

    pc_error_issues list = {0};
    pc_error e = PC_ERROR_WITH_ISSUES(&list);
    pc_error_issue_add(&e, PC_EINVAL, "a.yaml", 1, "k", "bad endpoint %s", "http://u:p@h");
    CHECK_STR(list.v[0].msg, "bad endpoint http://[REDACTED]@h");
    pc_error_set(&e, PC_EIO, "connect https://u:p@h:443 failed");
    CHECK_STR(e.msg, "connect https://[REDACTED]@h:443 failed");
}

int main(void)
{
    RUN(test_names_and_messages);
    RUN(test_error_object);
    RUN(test_issues);
    RUN(test_redaction);
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
