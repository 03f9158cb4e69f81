// GPT-2-shaped checkpoints with random weights, written at test time with the
// project's safetensors writer: the dashboard's tests need real servers with
// 12 x 12 and 32 x 32 heads, not only the bundled 6 x 6 model.
#pragma once

#include <QString>

namespace attnscope::dashboard::testing {

struct RandomGpt2 {
  int layers = 12;
  int heads = 12;
  int width = 48;  // hidden size; a multiple of heads
  int positions = 1024;
  unsigned seed = 7;
};

// Writes config.json, model.safetensors (float32) and the bundled model's
// GPT-2 tokenizer files (vocab.json, merges.txt, ...) into `dir`. Query and
// key weights are drawn wider than the rest so that heads attend sharply,
// as trained heads do. Returns an empty string, or what went wrong.
QString writeRandomGpt2(const QString& dir, const RandomGpt2& shape);

}  // namespace attnscope::dashboard::testing
