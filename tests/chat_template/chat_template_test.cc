// Chat templates rendered as Hugging Face renders them: the fixtures'
// Llama 3 and Qwen3 conversations byte for byte (and their ids through the
// tokenizer.json tokenizer), the Jinja subset on small templates, the content
// marks, and the errors.
#include "service/chat_template/chat_template.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/tokenizer/hf_tokenizer.h"

namespace attnscope::chat_template {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/tokenizers";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class FixtureChatTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureChatTest, RendersAndTokenizesLikeHuggingFace) {
  const std::string name = GetParam();
  auto model = LoadModelChatTemplate(kDir + "/" + name);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tok = tokenizer::HfTokenizer::Load(kDir + "/" + name + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto fixture = nlohmann::json::parse(ReadAll(kDir + "/" + name + "/" + name + "_chat.json"))["chat"];
  // The variables Hugging Face passed are the ones read from tokenizer_config.json.
  ASSERT_GE(fixture["template_vars"].size(), 2u);
  ASSERT_GE(fixture["messages"].size(), 3u);
  for (const auto& [key, value] : fixture["template_vars"].items()) {
    EXPECT_EQ(model->variables[key], value) << key;
  }
  ASSERT_GE(fixture["renders"].size(), 2u);
  for (const auto& render : fixture["renders"]) {
    nlohmann::json vars = model->variables;
    if (render.contains("enable_thinking")) vars["enable_thinking"] = render["enable_thinking"];
    const bool gen = render["add_generation_prompt"];
    auto out = model->chat_template.Render(fixture["messages"], gen, vars);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->text, render["tokenize_false_text"].get<std::string>()) << "generation prompt " << gen;
    auto enc = (*tok)->Encode(out->text);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->ids, render["tokenize_true_ids"].get<std::vector<int64_t>>());
    // Every message's content appears, marked as content, and nothing else is.
    size_t marked = 0;
    for (bool c : out->content) marked += c;
    size_t expected = 0;
    for (const auto& m : fixture["messages"]) {
      const std::string content = m["content"];
      expected += content.size();
      const size_t at = out->text.find(content);
      ASSERT_NE(at, std::string::npos);
      for (size_t k = at; k < at + content.size(); ++k) ASSERT_TRUE(out->content[k]) << k;
    }
    EXPECT_EQ(marked, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureChatTest, ::testing::Values("llama3", "qwen3"));

std::string RenderOrDie(const std::string& source, const nlohmann::json& vars = nlohmann::json::object(),
                        const nlohmann::json& messages = nlohmann::json::parse(R"([{"role":"user","content":"Hi"}])")) {
  auto t = ChatTemplate::Parse(source, "t");
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "";
  auto out = t->Render(messages, false, vars);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->text : "";
}

TEST(ChatTemplate, JinjaSubset) {
  EXPECT_EQ(RenderOrDie("{% for x in [1, 2, 3][::-1] %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"), "3,2,1");
  EXPECT_EQ(RenderOrDie("{{ 'a' ~ 1 ~ none }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 1 / 2 }}|{{ 2 ** 10 }}"), "a1None|3|2|0.5|1024");
  EXPECT_EQ(RenderOrDie("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"), "1");
  EXPECT_EQ(RenderOrDie("{% set x = 1 %}{% for m in messages %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(RenderOrDie("{{ '  Hi  ' | trim }}|{{ 'abc' | upper }}|{{ [1,2] | length }}|{{ undefined_thing | default('d') }}"),
            "Hi|ABC|2|d");
  EXPECT_EQ(RenderOrDie("{{ {'a': [1, 'x', none, true]} | tojson }}|{{ 'é\"' | tojson }}"),
            "{\"a\": [1, \"x\", null, true]}|\"é\\\"\"");
  EXPECT_EQ(RenderOrDie("{{ 'a-b-c'.split('-') | join('+') }}|{{ 'Hello'.startswith('He') }}|{{ 'x' in 'xyz' }}|{{ 3 not in [1] }}"),
            "a+b+c|True|True|True");
  EXPECT_EQ(RenderOrDie("{% if x is defined %}d{% elif y is none %}n{% else %}e{% endif %}", {{"y", nullptr}}), "n");
  EXPECT_EQ(RenderOrDie("{{ 'yes' if messages[0]['role'] == 'user' else 'no' }}{{ messages[0].content[1:] }}"), "yesi");
  EXPECT_EQ(RenderOrDie("{% macro greet(name, p='!') %}Hi {{ name }}{{ p }}{% endmacro %}{{ greet('A') }}{{ greet('B', p='?') }}"),
            "Hi A!Hi B?");
  EXPECT_EQ(RenderOrDie("{% set block %}in{{ 1 }}{% endset %}[{{ block }}]"), "[in1]");
  EXPECT_EQ(RenderOrDie("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(RenderOrDie("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(RenderOrDie("{% for m in messages %}{{ loop.index }}/{{ loop.length }}{{ loop.previtem is defined }}{% endfor %}"),
            "1/1False");
  EXPECT_EQ(RenderOrDie("{{ 'a\\nb' | indent(2) }}|{{ 'hello world' | title }}|{{ 'x' | capitalize }}"), "a\n  b|Hello World|X");
}

TEST(ChatTemplate, WhitespaceControlAsHuggingFace) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the
  // indentation before one; "-" strips all whitespace on its side; a
  // single trailing newline of the template is dropped.
  EXPECT_EQ(RenderOrDie("{% if true %}\n  a\n  {% endif %}\nb\n"), "  a\nb");
  EXPECT_EQ(RenderOrDie("x  {%- if true -%}  \n y {%- endif %}"), "xy");
  EXPECT_EQ(RenderOrDie("{# comment #}\n{{ 'k' }}\n"), "k");
}

TEST(ChatTemplate, ContentMarksFollowStringOperations) {
  auto t = ChatTemplate::Parse("[{{ messages[0].role }}]{{ (messages[0].content | trim).upper() + '!' }}", "t");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"  hey "}])"), false, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text, "[user]HEY!");
  EXPECT_EQ(out->content, std::vector<bool>({false, false, false, false, false, false, true, true, true, false}));
}

// Found by chat_template_fuzz (corpus edge_nested_loops): two nested
// range(1000) loops rendered for 46 s under ASan; a template from a model
// directory must not hold a request that long. Loops now share a budget of
// 100,000 items per rendering, far above what a conversation needs.
TEST(ChatTemplate, LoopsShareABudgetOfItemsPerRendering) {
  auto t = ChatTemplate::Parse(
      "{% for a in range(1000) %}\n{% for b in range(1000) %}x{% endfor %}{% endfor %}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "t: chat template line 2: loops visited more than 100000 items in one rendering");
  // 99 x 1000 items plus the outer 99 fit.
  t = ChatTemplate::Parse("{% for a in range(99) %}{% for b in range(1000) %}{% endfor %}{% endfor %}ok", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text, "ok");
}

// Found by the fuzz smoke (chat_template_fuzz, seed edge_string_repeat):
// 'ab' * 1000000000 built 16 MiB two bytes at a time, past the 10 s limit,
// and gave a string cut at the limit. It is now refused before building.
TEST(ChatTemplate, StringRepeatBeyondTheOutputLimitIsAnError) {
  auto t = ChatTemplate::Parse("x\n{{ 'ab' * 1000000000 }}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "t: chat template line 2: a string of 2 bytes repeated 1000000000 times is larger than 16 MiB");
  EXPECT_EQ(RenderOrDie("{{ 'ab' * 3 }}|{{ 'ab' * 0 }}|{{ 'ab' * -2 }}|{{ ('x' * 100000) | length }}"),
            "ababab|||100000");
}

// Found by chat_template_fuzz's long run (seed edge_big_range): range(10**8)
// built a million items before refusing, past the 10 s limit under ASan.
// range() now counts first (without overflow at the ends of int64) and
// refuses more than 100,000 items.
TEST(ChatTemplate, RangeIsCountedBeforeItIsBuilt) {
  auto t = ChatTemplate::Parse("{% for i in range(100000000) %}{% endfor %}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "t: chat template line 1: range: 100000000 items is more than 100000");
  auto items = [](const std::string& args) {
    return RenderOrDie("{% for i in range(" + args + ") %}{{ i }},{% endfor %}");
  };
  EXPECT_EQ(items("3"), "0,1,2,");
  EXPECT_EQ(items("5, 0, -2"), "5,3,1,");
  EXPECT_EQ(items("2, 2"), "");
  EXPECT_EQ(items("0, 10, 4"), "0,4,8,");
  EXPECT_EQ(items("9223372036854775806, 9223372036854775807, 100"), "9223372036854775806,");
}

// Found by chat_template_fuzz's long run (regression_number_out_of_range): an
// integer literal beyond int64 threw std::out_of_range from the parser and
// ended the process. Numbers out of range are now a parse error.
TEST(ChatTemplate, NumbersOutOfRangeAreAParseError) {
  auto t = ChatTemplate::Parse("a\n{% set x = 99999999999999999999 %}{{ x }}", "t");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "t: chat template line 2: the number 99999999999999999999 is out of range");
  t = ChatTemplate::Parse("{{ " + std::string(400, '9') + ".5 }}", "t");  // beyond double
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "t: chat template line 1: the number " + std::string(40, '9') + "... is out of range");
  EXPECT_EQ(RenderOrDie("{{ 9223372036854775807 }}|{{ 2.5 }}"), "9223372036854775807|2.5");
}

// Found by the fuzz smoke (regression_integer_overflow): {{ 4 ** 63 }}
// converted 8.5e37 to int64 (undefined behaviour, UBSan), and +, -, * of
// large integers wrapped. Integer arithmetic is now exact on int64 and a
// result beyond it is an error naming the operation; floats are unchanged.
TEST(ChatTemplate, IntegerOverflowIsAnError) {
  const auto fails = [](const std::string& expr) {
    auto t = ChatTemplate::Parse("{{ " + expr + " }}", "t");
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return std::string();
    auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
    EXPECT_FALSE(out.ok()) << expr << " gave " << (out.ok() ? out->text : "");
    return out.ok() ? std::string() : std::string(out.status().message());
  };
  EXPECT_EQ(fails("4 ** 63"),
            "t: chat template line 1: integer overflow in 4 ** 63 (beyond 64-bit integers)");
  EXPECT_NE(fails("9223372036854775807 + 1"), "");
  EXPECT_NE(fails("-9223372036854775807 - 2"), "");
  EXPECT_NE(fails("4294967296 * 4294967296"), "");
  EXPECT_NE(fails("(-9223372036854775807 - 1) // -1"), "");
  EXPECT_NE(fails("2 ** 63"), "");
  // Found by the fuzz smoke (regression_negated_int64_min): unary minus of
  // the smallest int64 negated it out of range (UBSan).
  EXPECT_EQ(fails("-(-9223372036854775807 - 1)"),
            "t: chat template line 1: integer overflow in -(-9223372036854775808) (beyond 64-bit "
            "integers)");
  EXPECT_EQ(RenderOrDie("{{ -(-9223372036854775807) }}|{{ -(-1.5) }}"), "9223372036854775807|1.5");
  EXPECT_EQ(RenderOrDie("{{ 2 ** 62 }}|{{ 3 ** 39 }}|{{ (-2) ** 63 }}|{{ 1 ** 1000000000000 }}|{{ 0 ** 0 }}"),
            "4611686018427387904|4052555153018976267|-9223372036854775808|1|1");
  EXPECT_EQ(RenderOrDie("{{ 9007199254740993 + 0 }}|{{ 9223372036854775806 + 1 }}"),
            "9007199254740993|9223372036854775807");
  EXPECT_EQ(RenderOrDie("{{ -7 // 2 }}|{{ 7 // -2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ -6 % 3 }}|{{ true + 1 }}"),
            "-4|-4|2|-2|0|2");
  EXPECT_EQ(RenderOrDie("{{ (-9223372036854775807 - 1) % -1 }}|{{ 2 ** -1 }}|{{ 4.0 ** 63 > 1 }}"), "0|0.5|True");
}

// Found by the fuzz smoke (regression_bad_unicode_escape): '\\uZZZZ' in a
// string literal made std::stoul throw, which ended the process. A \\u
// escape takes exactly four hex digits (Python refuses the template too).
TEST(ChatTemplate, BadUnicodeEscapeIsAParseError) {
  for (const char* literal : {"'\\uZZZZ'", "'\\u12'", "'\\u'", "'ab\\u00g1'"}) {
    auto t = ChatTemplate::Parse(std::string("x\n{{ ") + literal + " }}", "t");
    ASSERT_FALSE(t.ok()) << literal;
    EXPECT_EQ(t.status().message(),
              "t: chat template line 2: truncated \\uXXXX escape in a string literal")
        << literal;
  }
  EXPECT_EQ(RenderOrDie("{{ '\\u00e9\\u00E9|\\u4e2d' }}"), "\u00e9\u00e9|\u4e2d");
}

// Found by chat_template_fuzz's long run (regression_deep_parentheses): a few
// thousand '(' overflowed the parser's stack. Nesting beyond 200 levels is
// now a parse error; 150 levels still parse.
TEST(ChatTemplate, DeepNestingIsAParseError) {
  for (const std::string& deep : {std::string(5000, '(') + "1" + std::string(5000, ')'),
                                  "not " + std::string(0, ' ') + [] {
                                    std::string s;
                                    for (int i = 0; i < 5000; ++i) s += "not ";
                                    return s;
                                  }() + "1",
                                  std::string(5000, '-') + "1"}) {
    auto t = ChatTemplate::Parse("{{ " + deep + " }}", "t");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().message(), "t: chat template line 1: expression nested more than 200 deep");
  }
  EXPECT_EQ(RenderOrDie("{{ " + std::string(150, '(') + "7" + std::string(150, ')') + " }}"), "7");
}

TEST(ChatTemplate, ErrorsNameTheConstructAndLine) {
  auto t = ChatTemplate::Parse("ok\n{% include 'other.jinja' %}", "dir/tokenizer_config.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "dir/tokenizer_config.json: chat template line 2: unsupported statement 'include'");
  t = ChatTemplate::Parse("{{ x | frobnicate }}", "t");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("line 1: unsupported filter 'frobnicate'"));
  t = ChatTemplate::Parse("{% if messages[0].role != 'system' %}{{ raise_exception('System first!') }}{% endif %}", "t");
  ASSERT_TRUE(t.ok());
  out = t->Render(nlohmann::json::parse(R"([{"role":"user","content":"a"}])"), false, {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("the template raised an exception: System first!"));
  EXPECT_FALSE(ChatTemplate::Parse("{% for x in y %}", "t").ok());
  EXPECT_FALSE(ChatTemplate::Parse("{{ 'unclosed }}", "t").ok());
  EXPECT_THAT(ParseMessages("[{\"role\": \"user\"}]", "chat.json").status().message(),
              HasSubstr("chat.json: [0].content"));
  EXPECT_EQ(LoadModelChatTemplate(kDir + "/llama2").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace attnscope::chat_template
