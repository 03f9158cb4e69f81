// PromptAnalyzer as the runtime drives it: event streams, sequence
// filtering, restarts, and every inconsistency Finish must reject.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/prompt_analyzer.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope::analysis {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT = 3;
constexpr int kLayers = 2;

// A small stream: T = 3, L = 2, H = 1, uniform causal rows, hidden states of
// width 2, logits with V = 2. Each step can be overridden by a test.
class Stream {
 public:
  Stream() {
    // (1, T, T) uniform causal attention.
    for (int64_t i = 0; i < kT; ++i) {
      for (int64_t j = 0; j < kT; ++j) probs_.push_back(j <= i ? 1.0f / (i + 1) : 0.0f);
    }
    hidden_.assign(kT * 2, 1.0f);
    logits_.assign(kT * 2, 0.0f);
  }
  model::AttentionBlock Block(int layer, int64_t begin, int64_t end) const {
    model::AttentionBlock b;
    b.layer = layer;
    b.num_heads = 1;
    b.num_keys = kT;
    b.query_begin = begin;
    b.query_end = end;
    b.probs = probs_.data() + begin * kT;  // H = 1: rows are contiguous
    return b;
  }
  void Begin(PromptAnalyzer* a, int sequence = 0) const { a->OnBegin(sequence, kT); }
  void State(PromptAnalyzer* a, int s, int sequence = 0) const {
    a->OnHiddenState(sequence, s, hidden_.data(), kT, 2);
  }
  void Layer(PromptAnalyzer* a, int l) const { a->OnAttention(Block(l, 0, kT)); }
  void Logits(PromptAnalyzer* a, int sequence = 0) const {
    a->OnLogits(sequence, logits_.data(), kT, 2);
  }
  // The full, valid sequence of events.
  void All(PromptAnalyzer* a) const {
    Begin(a);
    State(a, 0);
    for (int l = 0; l < kLayers; ++l) {
      Layer(a, l);
      State(a, l + 1);
    }
    Logits(a);
  }

 private:
  std::vector<float> probs_, hidden_, logits_;
};

absl::Status FinishStatus(const PromptAnalyzer& a) { return a.Finish().status(); }

void ExpectRejected(const PromptAnalyzer& a, const std::string& message) {
  const absl::Status status = FinishStatus(a);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(message));
}

TEST(ObserverTest, NeedsFollowTheOptions) {
  AnalysisOptions options;
  model::ObserverNeeds needs = PromptAnalyzer(options).Needs();
  EXPECT_TRUE(needs.attention && needs.hidden_states && needs.logits);
  EXPECT_FALSE(needs.value_norms);
  EXPECT_TRUE(needs.attention_by_head);
  options.want_value_norms = true;
  EXPECT_TRUE(PromptAnalyzer(options).Needs().value_norms);
  options.heads_as_computed = false;
  EXPECT_FALSE(PromptAnalyzer(options).Needs().attention_by_head);
}

TEST(ObserverTest, ValidStreamAndOtherSequencesIgnored) {
  Stream st;
  PromptAnalyzer a(AnalysisOptions{});
  st.All(&a);
  // Events of sequence 1 (even malformed ones) do not disturb sequence 0.
  a.OnBegin(1, 99);
  model::AttentionBlock bad = st.Block(0, 0, kT);
  bad.sequence = 1;
  bad.num_keys = 99;
  a.OnAttention(bad);
  st.State(&a, 7, 1);
  absl::StatusOr<PromptStats> s = a.Finish();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_layers, 2);
  EXPECT_EQ(s->num_heads, 1);
  EXPECT_NEAR(s->sink_score[1][0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(s->next_token_entropy_nats[2], std::log(2.0), 1e-6);

  PromptAnalyzer second(AnalysisOptions{}, /*sequence=*/1);
  st.All(&second);  // all for sequence 0
  ExpectRejected(second, "no OnBegin");
}

// Head by head (as the runtime's kernel hands them over) or whole blocks
// (as a replay of recorded tensors does): the same statistics.
TEST(ObserverTest, HeadByHeadEqualsWholeBlocks) {
  Stream st;
  PromptAnalyzer whole(AnalysisOptions{}), by_head(AnalysisOptions{});
  EXPECT_TRUE(by_head.Needs().attention_by_head);
  for (PromptAnalyzer* a : {&whole, &by_head}) {
    st.Begin(a);
    st.State(a, 0);
    for (int l = 0; l < kLayers; ++l) {
      for (int64_t begin : {int64_t{0}, int64_t{2}}) {  // blocks of rows [0, 2) and [2, 3)
        model::AttentionBlock b = st.Block(l, begin, begin == 0 ? 2 : kT);
        if (a == &by_head) {
          a->OnAttentionStart(b);
          a->OnAttentionHead(b, 0);
          b.heads_published = true;
        }
        a->OnAttention(b);
      }
      st.State(a, l + 1);
    }
    st.Logits(a);
  }
  absl::StatusOr<PromptStats> a = whole.Finish(), b = by_head.Finish();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->sink_score, b->sink_score);
  EXPECT_EQ(a->attention_entropy, b->attention_entropy);
  EXPECT_EQ(a->first_token_mass, b->first_token_mass);
  EXPECT_EQ(a->prev_token_score, b->prev_token_score);
  EXPECT_EQ(a->received, b->received);
  EXPECT_NEAR(b->sink_score[1][0], 1.0 / 3, 1e-7);
}

// A block that carries its rows' entropies (the runtime's softmax computed
// them) is not asked for them again: the analyzer averages what it is given.
TEST(ObserverTest, EntropiesThatComeWithTheBlockAreTheOnesAveraged) {
  Stream st;
  EXPECT_TRUE(PromptAnalyzer(AnalysisOptions{}).Needs().row_entropy);
  const std::vector<double> exact = {0.0, std::log(2.0), std::log(3.0)};
  const std::vector<double> made_up = {0.25, 0.5, 0.75};
  for (const std::vector<double>* given : {&exact, &made_up}) {
    PromptAnalyzer a(AnalysisOptions{});
    st.Begin(&a);
    st.State(&a, 0);
    for (int l = 0; l < kLayers; ++l) {
      model::AttentionBlock b = st.Block(l, 0, kT);
      b.row_entropy = given->data();  // H = 1: one entropy per row
      a.OnAttention(b);
      st.State(&a, l + 1);
    }
    st.Logits(&a);
    absl::StatusOr<PromptStats> s = a.Finish();
    ASSERT_TRUE(s.ok()) << s.status();
    const double want = ((*given)[0] + (*given)[1] + (*given)[2]) / 3;
    EXPECT_NEAR(s->attention_entropy[1][0], want, 1e-12);
  }
}

TEST(ObserverTest, RestartAfterAFailedRun) {
  Stream st;
  PromptAnalyzer a(AnalysisOptions{});
  st.Begin(&a);
  a.OnAttention(st.Block(0, 1, kT));
  ExpectRejected(a, "expected the block to start at row 0");
  st.All(&a);
  EXPECT_TRUE(a.Finish().ok());
}

TEST(ObserverTest, RejectsInconsistentStreams) {
  Stream st;
  struct Bad {
    std::string message;
    std::function<void(PromptAnalyzer*)> events;
  };
  const std::vector<Bad> cases = {
      {"no OnBegin", [&](PromptAnalyzer*) {}},
      {"need at least 1", [&](PromptAnalyzer* a) { a->OnBegin(0, 0); }},
      {"num_tokens is 1099511627776", [&](PromptAnalyzer* a) { a->OnBegin(0, int64_t{1} << 40); }},
      {"called before OnBegin", [&](PromptAnalyzer* a) { st.State(a, 0); }},
      {"layer 1 has attention rows [0, 2) of T = 3",
       [&](PromptAnalyzer* a) {
         st.All(a);
         st.Begin(a);
         st.State(a, 0);
         st.Layer(a, 0);
         st.State(a, 1);
         a->OnAttention(st.Block(1, 0, 2));
         st.State(a, 2);
         st.Logits(a);
       }},
      {"expected the block to start at row 2",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         a->OnAttention(st.Block(0, 0, 2));
         a->OnAttention(st.Block(0, 1, 3));
       }},
      {"query rows not a non-empty range",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         a->OnAttention(st.Block(0, 0, 0));
       }},
      {"num_keys 4 != T = 3",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         model::AttentionBlock b = st.Block(0, 0, kT);
         b.num_keys = 4;
         a->OnAttention(b);
       }},
      {"num_heads 2 differs",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         st.Layer(a, 0);
         model::AttentionBlock b = st.Block(1, 0, 1);
         b.num_heads = 2;
         a->OnAttention(b);
       }},
      {"heads published without OnAttentionStart",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         model::AttentionBlock b = st.Block(0, 0, kT);
         b.heads_published = true;
         a->OnAttention(b);
       }},
      {"num_keys 4 != T = 3",  // caught at the start of a head-by-head block
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         model::AttentionBlock b = st.Block(0, 0, kT);
         b.num_keys = 4;
         a->OnAttentionStart(b);
         a->OnAttentionHead(b, 0);
         b.heads_published = true;
         a->OnAttention(b);
       }},
      {"layer outside", [&](PromptAnalyzer* a) {
         st.Begin(a);
         a->OnAttention(st.Block(-1, 0, kT));
       }},
      {"probs is null",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         model::AttentionBlock b = st.Block(0, 0, kT);
         b.probs = nullptr;
         a->OnAttention(b);
       }},
      {"expected hidden states 0..2",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         st.State(a, 0);
         st.Layer(a, 0);
         st.Layer(a, 1);
         st.State(a, 2);
         st.Logits(a);
       }},
      {"state published twice",
       [&](PromptAnalyzer* a) {
         st.All(a);
         st.State(a, 1);
       }},
      {"shape (2, 2) does not match T = 3",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         std::vector<float> x(4, 1.0f);
         a->OnHiddenState(0, 0, x.data(), 2, 2);
       }},
      {"no logits were published",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         st.State(a, 0);
         st.Layer(a, 0);
         st.State(a, 1);
       }},
      {"logits published twice",
       [&](PromptAnalyzer* a) {
         st.All(a);
         st.Logits(a);
       }},
      {"no attention was published",
       [&](PromptAnalyzer* a) {
         st.Begin(a);
         st.State(a, 0);
         st.Logits(a);
       }},
  };
  for (const Bad& c : cases) {
    PromptAnalyzer a(AnalysisOptions{});
    c.events(&a);
    ExpectRejected(a, c.message);
  }
}

TEST(ObserverTest, RequestedValueNormsMustArrive) {
  Stream st;
  AnalysisOptions options;
  options.want_value_norms = true;
  PromptAnalyzer a(options);
  st.All(&a);
  ExpectRejected(a, "value norms were requested but not provided");
}

TEST(AnalyzeTensorsTest, RejectsMismatchedSizes) {
  testing_util::OwnedTensors t;
  t.num_layers = 1;
  t.num_heads = 2;
  t.num_tokens = 3;
  t.width = 1;
  t.vocab = 1;
  t.attentions.assign(10, 0.0f);
  t.hidden_states.assign(6, 0.0f);
  t.logits.assign(3, 0.0f);
  absl::Status status = AnalyzeTensors(t.View(), AnalysisOptions{}).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("attentions has 10 values, the shape needs 18"));
  t.num_tokens = 0;
  status = AnalyzeTensors(t.View(), AnalysisOptions{}).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("every dimension must be >= 1"));
  t.num_tokens = 3;
  t.attentions.assign(18, 0.0f);
  AnalysisOptions options;
  options.want_value_norms = true;
  status = AnalyzeTensors(t.View(), options).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("value_norms has 0 values, the shape needs 6"));
  status = AnalyzeTensors(t.View(), AnalysisOptions{}, -1).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("query_block_size is -1"));
}

}  // namespace
}  // namespace attnscope::analysis
