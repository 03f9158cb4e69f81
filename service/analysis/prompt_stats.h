// Every number the analysis library reports for one prompt, as defined in
// service/analysis/definitions.md. Plain data: filled in by PromptAnalyzer::Finish,
// serialized by stats_json.h, rendered by text_report.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope::analysis {

// A (layers x heads) table: grid[l][h].
using HeadGrid = std::vector<std::vector<double>>;

// One of the model's most likely next tokens at a position.
struct Prediction {
  int64_t id = 0;
  double p = 0.0;     // softmax(Z[i])[id]
  std::string token;  // its text (filled by the engine from the tokenizer; "" if none)
};

struct PromptStats {
  int64_t num_layers = 0;  // L
  int64_t num_heads = 0;   // H (query heads)
  int64_t num_tokens = 0;  // T
  int64_t vocab = 0;       // V

  // Per head, [L][H].
  HeadGrid sink_score;         // A[l,h,T-1,0]
  HeadGrid first_token_mass;   // mean_{i>=1} A[l,h,i,0]; A[l,h,0,0] when T = 1
  // Gu et al.'s first-token importance alpha: (1/T) sum_{i=0..T-1} A[l,h,i,0]
  // (row 0 included, unlike first_token_mass).
  HeadGrid first_token_importance;
  HeadGrid attention_entropy;  // mean_i of the row entropy, nats
  HeadGrid prev_token_score;   // mean_{i>=1} A[l,h,i,i-1]; 0 when T = 1
  // Fraction of heads with l >= floor(L/2) whose sink score is > 0.5.
  double back_half_sink_share = 0.0;
  // Sink-epsilon: the share of (layer, head) pairs with first_token_importance
  // > sink_epsilon (Gu et al.; epsilon 0.3 by default).
  double sink_epsilon = 0.3;
  double sink_eps = 0.0;
  // Value-weighted share of the first token (Kobayashi et al. 2020), mean over
  // queries i >= 1 (i = 0 when T = 1): raw A[i,0]*||v_0||, and normalized by
  // sum_j A[i,j]*||v_j||. Empty unless value norms were requested.
  HeadGrid value_weighted_raw;
  HeadGrid value_weighted_normalized;
  // mean_{i=n+1..2n} A[l,h,i,i-n+1] on an induction probe (T = 2n+1). Empty
  // unless AnalysisOptions::induction_n > 0.
  HeadGrid induction_score;

  // Per token.
  std::vector<std::vector<double>> token_norms;  // [L+1][T], ||X[s,i,:]||_2
  std::vector<double> max_norm;                  // [T], max over s
  double massive_ratio = 1.0;  // max_norm[0] / lower_median(max_norm[1:]); 1 when T = 1
  int64_t massive_argmax = 0;  // first position of the largest max_norm
  std::vector<double> received;  // [T], R[j]
  std::vector<double> z;         // [T], log-MAD z-score of R
  std::vector<int64_t> structural;  // sorted, unique, within [0, T)
  double threshold = 6.0;
  int64_t num_candidates = 0;    // T minus the structural positions
  std::vector<int64_t> sinks;    // candidates with z > threshold, ascending
  double health = 10.0;          // context health, 0..10
  std::vector<double> next_token_entropy_nats;        // [T]
  std::vector<double> next_token_entropy_normalized;  // [T], divided by log V
  // Structural positions with z > threshold, ascending: expected sinks, never
  // in `sinks` nor in the health score.
  std::vector<int64_t> expected_sinks;
  // [T-1]: entry i is -ln p_i(x_{i+1}), the surprisal of the prompt's actual
  // next token under softmax(Z[i]). Empty when the input ids were not given.
  std::vector<double> next_token_surprisal_nats;
  // [T][k]: the k most likely next tokens at each position, most likely first
  // (ties: lower id first). Empty when k = 0.
  std::vector<std::vector<Prediction>> top_predictions;
};

}  // namespace attnscope::analysis
