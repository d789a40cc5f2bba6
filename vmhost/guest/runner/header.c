// The start header: what to run, sent by the host on stdin before the job's own stdin.
// Records are "KEY LEN\n" + LEN bytes + "\n", so any byte can appear in a value and nothing
// is ever parsed by a shell. The first record is "warren-run 1" (the protocol version); the
// last is "end 0". Everything is bounded; anything unexpected is an error, never a guess.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

enum { kMaxKey = 16, kMaxLenDigits = 8, kMaxRecordLine = kMaxKey + kMaxLenDigits + 2 };

bool valid_env_name(const char* name) {
  if (name[0] == '\0' || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char* p = name; *p; p++) {
    char c = *p;
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool valid_job_id(const char* id) {
  size_t n = 0;
  for (; id[n]; n++) {
    char c = id[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return n == 8;
}

static char* dup_value(const char* p, size_t n) {
  char* s = malloc(n + 1);
  if (s == NULL) return NULL;
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

void header_free(struct start_header* h) {
  free(h->command);
  free(h->cwd);
  for (int i = 0; i < h->env_count; i++) free(h->env[i].name);  // value shares the block
  memset(h, 0, sizeof *h);
}

// One record at buf[*pos]: 1 parsed, 0 incomplete, -1 malformed.
static int parse_record(struct start_header* h, const char* buf, size_t len, size_t* pos, char* err,
                        size_t err_len) {
  const char* p = buf + *pos;
  size_t avail = len - *pos;
  size_t scan = avail < kMaxRecordLine ? avail : kMaxRecordLine;
  const char* nl = memchr(p, '\n', scan);
  if (nl == NULL) {
    if (avail >= kMaxRecordLine) {
      snprintf(err, err_len, "header record line too long");
      return -1;
    }
    return 0;
  }
  const char* sp = memchr(p, ' ', (size_t)(nl - p));
  if (sp == NULL || sp == p || sp - p > kMaxKey || nl - sp - 1 < 1 || nl - sp - 1 > kMaxLenDigits) {
    snprintf(err, err_len, "malformed header record");
    return -1;
  }
  char key[kMaxKey + 1];
  memcpy(key, p, (size_t)(sp - p));
  key[sp - p] = '\0';
  size_t vlen = 0;
  for (const char* d = sp + 1; d < nl; d++) {
    if (*d < '0' || *d > '9') {
      snprintf(err, err_len, "malformed header length");
      return -1;
    }
    vlen = vlen * 10 + (size_t)(*d - '0');
  }
  size_t head = (size_t)(nl - p) + 1;
  if (*pos + head + vlen + 1 > kMaxHeader) {
    snprintf(err, err_len, "header over %d bytes", kMaxHeader);
    return -1;
  }
  if (avail < head + vlen + 1) return 0;
  const char* v = nl + 1;
  if (v[vlen] != '\n') {
    snprintf(err, err_len, "header record %s not terminated", key);
    return -1;
  }
  bool has_nul = memchr(v, '\0', vlen) != NULL;
  bool first = *pos == 0;
  if (first != (strcmp(key, "warren-run") == 0)) {
    snprintf(err, err_len, "header must start with the protocol version");
    return -1;
  }
  if (strcmp(key, "warren-run") == 0) {
    if (vlen != 1 || v[0] != '1') {
      snprintf(err, err_len, "unsupported protocol version");
      return -1;
    }
  } else if (strcmp(key, "cmd") == 0) {
    if (h->command != NULL || vlen > kMaxCommand || has_nul) {
      snprintf(err, err_len, "bad or repeated cmd");
      return -1;
    }
    h->command = dup_value(v, vlen);
    h->command_len = vlen;
    if (h->command == NULL) {
      snprintf(err, err_len, "out of memory");
      return -1;
    }
  } else if (strcmp(key, "cwd") == 0) {
    if (h->cwd != NULL || vlen > kMaxCwd || has_nul) {
      snprintf(err, err_len, "bad or repeated cwd");
      return -1;
    }
    h->cwd = dup_value(v, vlen);
    if (h->cwd == NULL) {
      snprintf(err, err_len, "out of memory");
      return -1;
    }
  } else if (strcmp(key, "env") == 0) {
    if (h->env_count >= kMaxEnvCount || vlen > kMaxEnvEntry || has_nul) {
      snprintf(err, err_len, "too many or too large env entries");
      return -1;
    }
    char* s = dup_value(v, vlen);
    if (s == NULL) {
      snprintf(err, err_len, "out of memory");
      return -1;
    }
    char* eq = strchr(s, '=');
    if (eq == NULL) {
      free(s);
      snprintf(err, err_len, "env entry without '='");
      return -1;
    }
    *eq = '\0';
    if (!valid_env_name(s)) {
      free(s);
      snprintf(err, err_len, "bad env name");
      return -1;
    }
    h->env[h->env_count].name = s;
    h->env[h->env_count].value = eq + 1;
    h->env_count++;
  } else if (strcmp(key, "stdin") == 0) {
    if (vlen != 1 || (v[0] != '0' && v[0] != '1')) {
      snprintf(err, err_len, "bad stdin record");
      return -1;
    }
    h->has_stdin = v[0] == '1';
  } else if (strcmp(key, "end") == 0) {
    if (vlen != 0) {
      snprintf(err, err_len, "bad end record");
      return -1;
    }
    if (h->command == NULL) {
      snprintf(err, err_len, "header has no cmd");
      return -1;
    }
    h->complete = true;
  } else {
    snprintf(err, err_len, "unknown header record");
    return -1;
  }
  *pos += head + vlen + 1;
  return 1;
}

int header_parse(struct start_header* h, const char* buf, size_t len, size_t* pos, char* err,
                 size_t err_len) {
  while (!h->complete) {
    if (*pos >= len) return 0;
    int r = parse_record(h, buf, len, pos, err, err_len);
    if (r <= 0) return r;
  }
  return 1;
}

void frame_head(char out[5], char type, uint32_t len) {
  out[0] = type;
  out[1] = (char)(len >> 24);
  out[2] = (char)(len >> 16);
  out[3] = (char)(len >> 8);
  out[4] = (char)len;
}
