"""Loading libldpref through cffi in ABI mode (no compiler at install time).

The declarations below are those of client/lib/ldpref.h that the package
uses, copied as they are: cffi lays the structs out by the platform's C
rules, so they match the library's as long as the header does.

Where the library is looked for, first found wins:

1. ``LDPREF_LIBRARY``: the path of a ``libldpref.so`` (any name);
2. the build directory of the ldpref checkout the package comes from
   (``$LDPREF_BUILD``, default ``build``, under the checkout's root): the
   checkout the package sits in when used from the source tree, or the one
   ``pip install`` was run from (recorded at install time);
3. the install prefix: ``$LDPREF_PREFIX/lib``, then ``sys.prefix/lib`` and
   ``/usr/local/lib`` (``make install``'s default);
4. the dynamic loader's own search (``LD_LIBRARY_PATH``, ``ldconfig``'s
   cache) for ``libldpref.so.0``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

from cffi import FFI

CDEF = r"""
const char *ldpref_strerror(int code);
const char *ldpref_error_name(int code);
const char *ldpref_version(void);

typedef struct ldpref_options {
    const char *server_url;
    const char *key_path;
    const char *ledger_path;
    double max_epsilon_per_label;
    double max_epsilon_total;
    long timeout_ms;
    long connect_timeout_ms;
    const char *operator_token;
    const char *ca_file;
    double simulate_ctl_alpha;
    const char *simulate_ctl_strategy;
    uint64_t simulate_ctl_seed;
} ldpref_options;
void ldpref_options_init(ldpref_options *opts);

typedef struct ldpref_client ldpref_client;
int ldpref_client_open(const ldpref_options *opts, ldpref_client **out);
void ldpref_client_close(ldpref_client *c);
const char *ldpref_errmsg(const ldpref_client *c);
void ldpref_free(void *p);

int ldpref_keygen(const char *key_path, char pub_b64[48]);
int ldpref_public_key(const ldpref_client *c, char out[48]);

typedef struct ldpref_enrollment {
    int64_t annotator_id;
    char pseudonym[64];
    char campaign[129];
    double epsilon_budget;
} ldpref_enrollment;
int ldpref_enroll(ldpref_client *c, const char *token, ldpref_enrollment *out);

typedef struct ldpref_turn {
    char *role;
    char *content;
} ldpref_turn;
typedef struct ldpref_task {
    int64_t task_id;
    char *campaign;
    char *prompt;
    char *a;
    char *b;
    double epsilon_proposed;
    double epsilon_min;
    double epsilon_max;
    ldpref_turn *context;
    size_t n_context;
} ldpref_task;
int ldpref_next_tasks(ldpref_client *c, int count, ldpref_task **tasks, size_t *n);
int ldpref_set_max_task_bytes(ldpref_client *c, size_t bytes);
void ldpref_tasks_free(ldpref_task *tasks, size_t n);

typedef struct ldpref_receipt {
    int64_t label_id;
    int64_t task_id;
    int z;
    double epsilon;
    int64_t received_at;
    int resent;
    int simulated;
} ldpref_receipt;
int ldpref_answer_id(ldpref_client *c, int64_t task_id, int choice, ldpref_receipt *out);

typedef struct ldpref_batch_item {
    const ldpref_task *task;
    int64_t task_id;
    int choice;
    int error;
    ldpref_receipt receipt;
    char message[256];
} ldpref_batch_item;
int ldpref_answer_batch(ldpref_client *c, ldpref_batch_item *items, size_t n);
int ldpref_resend_pending(ldpref_client *c, size_t *sent, size_t *pending);
int ldpref_skip(ldpref_client *c, int64_t task_id);

typedef struct ldpref_progress {
    char campaign[129];
    int64_t tasks_total;
    int64_t tasks_complete;
    int64_t labels;
    int64_t labels_needed;
    int64_t annotator_labels;
    int64_t annotator_quota;
} ldpref_progress;
int ldpref_progress_get(ldpref_client *c, ldpref_progress *out);

typedef struct ldpref_budget {
    double spent;
    double max_epsilon_total;
    double max_epsilon_per_label;
    int64_t labels;
    int64_t pending;
    int64_t simulated;
} ldpref_budget;
int ldpref_budget_get(ldpref_client *c, ldpref_budget *out);

int ldpref_admin_tasks_load(ldpref_client *c, const char *jsonl_path, const char *campaign,
                            char **json_out);
int ldpref_admin_enrollment_tokens(ldpref_client *c, const char *campaign, int count,
                                   char **json_out);
typedef struct ldpref_campaign {
    const char *name;
    double epsilon_min;
    double epsilon_max;
    int allow_infinite;
    double epsilon_budget;
    double epsilon_default;
    int labels_per_task;
    int64_t annotator_quota;
} ldpref_campaign;
void ldpref_campaign_init(ldpref_campaign *spec);
int ldpref_admin_campaign_create(ldpref_client *c, const ldpref_campaign *spec, char **json_out);
int ldpref_admin_revoke(ldpref_client *c, const char *key_or_pseudonym);
int ldpref_admin_token_create(ldpref_client *c, const char *name, const char *scopes,
                              char **json_out);
int ldpref_admin_tokens(ldpref_client *c, char **json_out);
int ldpref_admin_token_revoke(ldpref_client *c, const char *id, char **json_out);
int ldpref_admin_token_rotate(ldpref_client *c, const char *id, char **json_out);
int ldpref_admin_stats(ldpref_client *c, char **json_out);
int ldpref_admin_campaign(ldpref_client *c, const char *campaign, int64_t bucket_s,
                          char **json_out);
int ldpref_admin_annotators(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                            char **json_out);
int ldpref_admin_tasks(ldpref_client *c, const char *campaign, int64_t offset, int64_t limit,
                       char **json_out);
int ldpref_admin_task(ldpref_client *c, int64_t id, char **json_out);
int ldpref_admin_quality(ldpref_client *c, const char *campaign, char **json_out);
int ldpref_admin_audit(ldpref_client *c, int64_t after_id, int64_t limit, char **json_out);
int ldpref_admin_export_format_path(ldpref_client *c, const char *campaign, const char *view,
                                    int64_t version, const char *format, const char *path);

typedef struct ldpref_hf_options {
    const char *campaign;
    const char *view;
    int64_t version;
    const char *format;
    const char *license;
    const char *pretty_name;
} ldpref_hf_options;
void ldpref_hf_options_init(ldpref_hf_options *o);
int ldpref_admin_export_hf(ldpref_client *c, const char *dir, const ldpref_hf_options *o,
                           char **json_out);

int ldpref_admin_retrain(ldpref_client *c, const char *request_json, char **json_out);
int ldpref_admin_run_get(ldpref_client *c, int64_t run, char **json_out);
int ldpref_admin_runs(ldpref_client *c, int limit, char **json_out);
int ldpref_admin_run_cancel(ldpref_client *c, int64_t run, char **json_out);
int ldpref_admin_run_wait(ldpref_client *c, int64_t run, long poll_ms,
                          void (*on_progress)(void *ctx, const char *run_json), void *ctx,
                          char **json_out);
int ldpref_admin_models(ldpref_client *c, char **json_out);
int ldpref_admin_model_get(ldpref_client *c, int64_t version, char **json_out);
int ldpref_admin_model_activate(ldpref_client *c, int64_t version, char **json_out);
int ldpref_admin_schedule_get(ldpref_client *c, char **json_out);
int ldpref_admin_schedule_set(ldpref_client *c, const char *schedule_json, char **json_out);

typedef struct ldpref_corruption {
    const char *campaign;
    double alpha;
    const char *strategy;
    uint64_t seed;
    int64_t feature;
} ldpref_corruption;
void ldpref_corruption_init(ldpref_corruption *spec);
int ldpref_admin_corruption_set(ldpref_client *c, const ldpref_corruption *spec, char **json_out);
int ldpref_admin_corruption_get(ldpref_client *c, const char *campaign, char **json_out);

int ldpref_score(ldpref_client *c, const char *request_json, char **json_out);
"""

ffi = FFI()
ffi.cdef(CDEF)

# The library's constants used here (ldpref.h).
CHOICE_A, CHOICE_B, CHOICE_CANT_TELL = 0, 1, 2
KEY_B64_SIZE = 48


def checkout_root() -> Optional[Path]:
    """The ldpref checkout this package belongs to, if any: the source tree
    it sits in, or the one recorded when it was installed with pip."""
    here = Path(__file__).resolve().parent
    root = here.parents[2]  # ldpref/ -> python/ -> client/ -> the checkout
    if (root / "client" / "lib" / "ldpref.h").is_file():
        return root
    try:
        from ._checkout import CHECKOUT  # written by setup.py at install time
    except ImportError:
        return None
    path = Path(CHECKOUT)
    return path if (path / "client" / "lib" / "ldpref.h").is_file() else None


def candidates() -> List[str]:
    """The paths tried for libldpref, in order (see the module docstring)."""
    out: List[str] = []
    env = os.environ.get("LDPREF_LIBRARY")
    if env:
        return [env]
    root = checkout_root()
    if root is not None:
        out.append(str(root / os.environ.get("LDPREF_BUILD", "build") / "libldpref.so"))
    prefixes = [os.environ.get("LDPREF_PREFIX"), sys.prefix, "/usr/local"]
    for p in prefixes:
        if p:
            out.append(os.path.join(p, "lib", "libldpref.so.0"))
    out.append("libldpref.so.0")  # the dynamic loader's search
    return out


def load():
    """Opens the first library found; ImportError listing the paths tried."""
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "libldpref not found; build it (make) or set LDPREF_LIBRARY to its path. Tried: "
        + "; ".join(tried)
    )


lib, library_path = load()
