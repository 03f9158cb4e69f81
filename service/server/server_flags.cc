#include "service/server/server_flags.h"

#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace attnscope::server {

const char kUsage[] = R"(Usage: attnscope-server [options]

Serves attnscope.v1.Analyzer over gRPC (with grpc.health.v1 health checking
and server reflection) and Prometheus metrics over HTTP.

  --listen ADDR             gRPC address (default 127.0.0.1:50051; port 0
                            picks a free port, printed on stdout)
  --metrics-listen ADDR     /metrics address (default 127.0.0.1:9464; port 0 ok)
  --model NAME=DIR          load the model in DIR as NAME (repeatable; the first
                            is the default model; default: the bundled model
                            as tiny-gpt2)
  --threads N               libtorch intra-op threads (default: all cores)
  --device D                where the models run: cpu (default), cuda or
                            auto (cuda when this build's libtorch has CUDA and
                            sees a GPU, else cpu); cuda on a CPU-only build
                            exits 1 saying so
  --precision P             matrix products of requests that name none:
                            float32 (default), bf16 (bfloat16 operands,
                            statistics in float32) or auto (the checkpoint's
                            dtype: bf16 for BF16 weights, else float32)
  --max-concurrent N        analyses/generations computing at once (default:
                            cores / threads, at least 1: more only makes the
                            forward passes fight over the cores)
  --max-queue N             requests waiting beyond that (default 64); more
                            get RESOURCE_EXHAUSTED
  --max-prompt-tokens N     longest prompt accepted (default 0: the model's
                            positions)
  --max-message-bytes N     largest request message (default 4194304); larger
                            ones get RESOURCE_EXHAUSTED
  --max-new-tokens N        most tokens one Generate may ask for (default
                            1024; 0: only the model's positions)
  --max-attention-bytes N   most raw attention bytes one Analyze may ask for
                            (default 268435456; 0: no limit)
  --max-streams-per-client N  Analyze, Generate, EvaluateEviction and Subscribe
                            calls one client host may have open at once
                            (default 32; 0: no limit); behind a proxy, the
                            proxy is one client
  --max-subscribers N       Subscribe streams at once (default 64)
  --tensor-chunk-bytes N    attention bytes per TensorChunk (default and
                            maximum 1048576)
  --tls-cert FILE           serve gRPC over TLS with this PEM certificate
                            chain (with --tls-key)
  --tls-key FILE            the PEM private key of --tls-cert
  --tls-client-ca FILE      mutual TLS: require client certificates signed by
                            this PEM CA
  --auth-token-file FILE    require "authorization: Bearer <token>" on every
                            Analyzer call, the token being this file's first
                            line (at least 16 characters); the gRPC health
                            service stays open for probes. /metrics has
                            neither TLS nor a token: keep --metrics-listen
                            on loopback or behind a network policy
  --drain-seconds X         on SIGTERM/SIGINT, time given to in-flight
                            requests before they are cancelled (default 10)
  --help                    this text
)";

namespace {

using Setter = std::function<absl::Status(const std::string&)>;

absl::Status BadValue(const std::string& flag, const std::string& value,
                      const std::string& accepted) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": '", value, "' is not ", accepted));
}

// "host:port", "[ipv6]:port" or ":port" with a port in 0..65535, as gRPC and
// the metrics server bind it; anything else names the flag and the value.
Setter ListenSetter(const std::string& flag, std::string* target) {
  return [=](const std::string& value) {
    const size_t colon = value.rfind(':');
    const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
    int64_t number = -1;
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(port, &number) || number > 65535) {
      return BadValue(flag, value, "HOST:PORT with a port in 0..65535 (0 picks a free port)");
    }
    *target = value;
    return absl::OkStatus();
  };
}

template <typename Int>
Setter IntSetter(const std::string& flag, Int* target, int64_t min, int64_t max) {
  return [=](const std::string& value) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < min || v > max) {
      return BadValue(flag, value, absl::StrCat("an integer in [", min, ", ", max, "]"));
    }
    *target = static_cast<Int>(v);
    return absl::OkStatus();
  };
}

// A path, read later (LoadServerSecurity names the flag if it cannot be).
Setter FileSetter(const std::string& flag, std::string* target) {
  return [=](const std::string& value) {
    if (value.empty()) return BadValue(flag, value, "a file path");
    *target = value;
    return absl::OkStatus();
  };
}

// A value that `parse` (model::ParseDeviceKind, ParsePrecision) accepts.
template <typename T, typename Parse>
Setter ChoiceSetter(const std::string& flag, T* target, Parse parse, const std::string& accepted) {
  return [=](const std::string& value) {
    absl::StatusOr<T> parsed = parse(value);
    if (!parsed.ok()) return BadValue(flag, value, accepted);
    *target = *parsed;
    return absl::OkStatus();
  };
}

Setter ModelSetter(ServerFlags* flags) {
  return [=](const std::string& value) {
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
      return BadValue("model", value, "NAME=DIR (e.g. tiny-gpt2=models/tiny-gpt2)");
    }
    flags->models.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    return absl::OkStatus();
  };
}

std::map<std::string, Setter> Setters(ServerFlags* f) {
  rpc::ServiceConfig* s = &f->rpc.service;
  return {
      {"listen", ListenSetter("listen", &f->rpc.listen)},
      {"metrics-listen", ListenSetter("metrics-listen", &f->metrics_listen)},
      {"model", ModelSetter(f)},
      {"threads", IntSetter("threads", &f->threads, 0, 1024)},
      {"device", ChoiceSetter("device", &f->device, model::ParseDeviceKind, "cpu, cuda or auto")},
      {"precision", ChoiceSetter("precision", &s->default_precision, model::ParsePrecision,
                                 "float32 or bf16")},
      {"max-concurrent", IntSetter("max-concurrent", &s->max_concurrent, 1, 4096)},
      {"max-queue", IntSetter("max-queue", &s->max_queue, 0, 1 << 20)},
      {"max-prompt-tokens", IntSetter("max-prompt-tokens", &s->max_prompt_tokens, 0, 1 << 30)},
      {"max-message-bytes", IntSetter("max-message-bytes", &f->rpc.max_message_bytes, 1024,
                                      (int64_t{1} << 31) - 1)},
      {"max-new-tokens", IntSetter("max-new-tokens", &s->max_new_tokens, 0, 1 << 30)},
      {"max-attention-bytes",
       IntSetter("max-attention-bytes", &s->max_attention_bytes, 0, int64_t{1} << 40)},
      {"max-streams-per-client",
       IntSetter("max-streams-per-client", &s->max_streams_per_client, 0, 1 << 16)},
      {"tls-cert", FileSetter("tls-cert", &f->tls_cert_file)},
      {"tls-key", FileSetter("tls-key", &f->tls_key_file)},
      {"tls-client-ca", FileSetter("tls-client-ca", &f->tls_client_ca_file)},
      {"auth-token-file", FileSetter("auth-token-file", &f->auth_token_file)},
      {"max-subscribers", IntSetter("max-subscribers", &s->max_subscribers, 0, 1 << 16)},
      {"tensor-chunk-bytes",
       IntSetter("tensor-chunk-bytes", &s->tensor_chunk_bytes, 1, int64_t{1} << 20)},
      {"drain-seconds",
       [f](const std::string& v) {
         if (!absl::SimpleAtod(v, &f->drain_seconds) || !std::isfinite(f->drain_seconds) ||
             f->drain_seconds < 0 || f->drain_seconds > 3600) {
           return BadValue("drain-seconds", v, "a number of seconds in [0, 3600]");
         }
         return absl::OkStatus();
       }},
  };
}

}  // namespace

absl::StatusOr<ServerFlags> ParseServerFlags(const std::vector<std::string>& args) {
  ServerFlags flags;
  const std::map<std::string, Setter> setters = Setters(&flags);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto setter = setters.find(name);
    if (setter == setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (eq == std::string::npos) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (absl::Status s = setter->second(value); !s.ok()) return s;
    if (name == "max-concurrent") flags.max_concurrent_set = true;
  }
  return flags;
}

bool IsLoopbackAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return host.rfind("127.", 0) == 0 || host == "[::1]" || host == "localhost";
}

}  // namespace attnscope::server
