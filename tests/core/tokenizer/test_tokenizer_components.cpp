// Behaviours the golden files do not reach, on small tokenizer.json files written here: added tokens with
// lstrip/rstrip/single_word/normalized, every split behaviour, byte fallback, post-processing, and refusals
// of what the tokenizer does not support. Expected values follow the Rust `tokenizers` library.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "SharedData.h"
#include "tokenizer/ByteLevel.h"
#include "tokenizer/ConfigContext.h"
#include "tokenizer/Decoders.h"
#include "tokenizer/Normalizers.h"
#include "tokenizer/PreTokenizers.h"
#include "tokenizer/Regex.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"

namespace {

using nlohmann::json;
using pareto::InputError;
using pareto::TokenId;
using pareto::Tokenizer;
namespace tok = pareto::tok;

std::string writeTokenizer(const std::string& name, const json& j) {
  const std::string dir = pareto::test::scratchDir("tokenizer-" + name);
  const std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << j.dump(1);
  return path;
}

std::vector<TokenId> ids(std::initializer_list<TokenId> l) { return l; }

// The message of the InputError that loading `j` raises (empty when it loads).
std::string loadError(const std::string& name, const json& j, std::string* path = nullptr) {
  const std::string p = writeTokenizer(name, j);
  if (path != nullptr) *path = p;
  try {
    Tokenizer::fromPath(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

// A character-level BPE with a couple of merges, a lowercasing normalizer and added tokens of every kind.
json addedTokensTokenizer() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 9,  "content": "<sp>",     "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 10, "content": "[L]",      "single_word": false, "lstrip": true,  "rstrip": false, "normalized": false, "special": false},
      {"id": 11, "content": "[R]",      "single_word": false, "lstrip": false, "rstrip": true,  "normalized": false, "special": false},
      {"id": 12, "content": "xy",       "single_word": true,  "lstrip": false, "rstrip": false, "normalized": false, "special": false},
      {"id": 13, "content": "YY",       "single_word": false, "lstrip": false, "rstrip": false, "normalized": true,  "special": false},
      {"id": 14, "content": "<sp><sp>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
    ],
    "normalizer": {"type": "Lowercase"},
    "pre_tokenizer": null,
    "post_processor": null,
    "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": false, "byte_fallback": false,
              "vocab": {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "abc": 5, "x": 6, "y": 7, " ": 8},
              "merges": ["a b", "ab c"]}
  })");
}

TEST(TokenizerAddedTokens, SplitOutBeforeTheModel) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  EXPECT_EQ(t.encode("abc<sp>ab"), ids({5, 9, 4}));
  EXPECT_EQ(t.encode(""), ids({}));
  // Leftmost, then longest.
  EXPECT_EQ(t.encode("<sp><sp><sp>"), ids({14, 9}));
  EXPECT_EQ(t.vocabSize(), 15u);
  EXPECT_EQ(t.tokenToId("<sp>"), std::optional<TokenId>(9));
  EXPECT_EQ(t.idToToken(14), std::optional<std::string>("<sp><sp>"));
  EXPECT_EQ(t.idToToken(4), std::optional<std::string>("ab"));
}

TEST(TokenizerAddedTokens, LstripAndRstripSwallowWhitespace) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  EXPECT_EQ(t.encode("ab   c"), ids({4, 8, 8, 8, 3}));  // the control: spaces are tokens
  EXPECT_EQ(t.encode("ab   [L]c"), ids({4, 10, 3}));
  EXPECT_EQ(t.encode("[R]   abc"), ids({11, 5}));
  EXPECT_EQ(t.encode("ab [R] [L] c"), ids({4, 8, 11, 10, 8, 3}));
  // lstrip never reaches back into a previous added token.
  EXPECT_EQ(t.encode("<sp>  [L]"), ids({9, 10}));
}

TEST(TokenizerAddedTokens, SingleWordOnlyMatchesWholeWords) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  EXPECT_EQ(t.encode("xy"), ids({12}));
  EXPECT_EQ(t.encode("a xy b"), ids({1, 8, 12, 8, 2}));
  EXPECT_EQ(t.encode("axy"), ids({1, 6, 7}));
  EXPECT_EQ(t.encode("xya"), ids({6, 7, 1}));
}

TEST(TokenizerAddedTokens, NormalizedTokensMatchNormalizedText) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  // "YY" is normalized (lowercased) and matched in the lowercased text.
  EXPECT_EQ(t.encode("YY"), ids({13}));
  EXPECT_EQ(t.encode("yy"), ids({13}));
  EXPECT_EQ(t.encode("xYY"), ids({6, 13}));
  // "xy" is not normalized: upper case does not match it.
  EXPECT_EQ(t.encode("XY"), ids({6, 7}));
}

TEST(TokenizerAddedTokens, UnknownCharactersWithoutFallback) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  EXPECT_EQ(t.encode("abz"), ids({4, 0}));
  EXPECT_EQ(t.encode("zz"), ids({0, 0}));  // fuse_unk is false
}

TEST(TokenizerAddedTokens, DecodeSkipsSpecialTokensOnRequest) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  // Without a decoder the tokens are joined with spaces.
  EXPECT_EQ(t.decode({5, 9, 4}), "abc <sp> ab");
  EXPECT_EQ(t.decode({5, 9, 4}, true), "abc ab");
  EXPECT_EQ(t.decode({5, 10, 4}, true), "abc [L] ab");  // [L] is not special
  EXPECT_THROW(t.decode({99}), InputError);
}

TEST(TokenizerAddedTokens, IdsFollowTheVocabularyLikeTheRustLibrary) {
  json j = addedTokensTokenizer();
  // A token the model vocabulary already has keeps the model's id.
  j["added_tokens"].push_back(json::parse(
      R"({"id": 8, "content": "abc", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false})"));
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added-ids", j));
  EXPECT_EQ(t.tokenToId("abc"), std::optional<TokenId>(5));
  EXPECT_EQ(t.encode("xabc"), ids({6, 5}));
}

// SentencePiece-style BPE: Prepend/Replace normalizers, byte fallback, fused unknowns, BOS template and the
// decoder chain that undoes it all.
json byteFallbackTokenizer(bool fuseUnk) {
  json j = json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 7, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
    ],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [7], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "byte_fallback": true,
              "vocab": {"<unk>": 0, "<0xE2>": 1, "<0x82>": 2, "<0xAC>": 3, "a": 4, "▁": 5, "▁a": 6, "<s>": 7},
              "merges": [["▁", "a"]]}
  })");
  j["model"]["fuse_unk"] = fuseUnk;
  return j;
}

TEST(TokenizerByteFallback, UnknownCharactersBecomeBytesOrUnk) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("bytefallback", byteFallbackTokenizer(true)));
  // "€" is E2 82 AC, all three byte tokens exist; "z" has neither a token nor <0x7A>: <unk>, fused.
  EXPECT_EQ(t.encode("a€zz"), ids({6, 1, 2, 3, 0}));
  EXPECT_EQ(t.decode({6, 1, 2, 3, 0}), "a€<unk>");
  EXPECT_EQ(t.decode({6, 1, 2, 3, 0}, true), "a€");
  // Byte tokens that are not valid UTF-8 decode to one U+FFFD each.
  EXPECT_EQ(t.decode({1, 2, 4}), "\xEF\xBF\xBD\xEF\xBF\xBD" "a");

  const Tokenizer unfused = Tokenizer::fromPath(writeTokenizer("bytefallback-unfused", byteFallbackTokenizer(false)));
  EXPECT_EQ(unfused.encode("zz"), ids({5, 0, 0}));
}

TEST(TokenizerByteFallback, TemplateProcessingAddsBos) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("bytefallback", byteFallbackTokenizer(true)));
  EXPECT_EQ(t.encode("a", true), ids({7, 6}));
  EXPECT_EQ(t.encode("a", false), ids({6}));
  EXPECT_EQ(t.encode("a a", true), ids({7, 6, 6}));
  EXPECT_EQ(t.decode({7, 6, 6}), "<s> a a");
  EXPECT_EQ(t.decode({7, 6, 6}, true), "a a");
}

TEST(TokenizerPostProcessing, TruncationLeavesRoomForSpecialTokensAndPaddingFills) {
  json j = byteFallbackTokenizer(true);
  j["truncation"] = json::parse(R"({"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0})");
  j["padding"] = json::parse(
      R"({"strategy": {"Fixed": 5}, "direction": "Left", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "<unk>"})");
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("truncation", j));
  EXPECT_EQ(t.encode("a a a a", true), ids({0, 0, 7, 6, 6}));
  EXPECT_EQ(t.encode("a a a a", false), ids({0, 0, 6, 6, 6}));
}

json subwordTokenizer(const std::string& modelExtras, const json& vocab, const json& merges) {
  json j = json::parse(R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
    "decoder": {"type": "BPEDecoder", "suffix": "</w>"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false}})");
  const json extras = json::parse(modelExtras);
  for (auto it = extras.begin(); it != extras.end(); ++it) j["model"][it.key()] = it.value();
  j["model"]["vocab"] = vocab;
  j["model"]["merges"] = merges;
  return j;
}

TEST(TokenizerBpe, ContinuingSubwordPrefixAndEndOfWordSuffix) {
  // With "##", non-initial characters carry the prefix and a merge drops it from its right part.
  const Tokenizer prefixed = Tokenizer::fromPath(writeTokenizer(
      "prefix", subwordTokenizer(R"({"continuing_subword_prefix": "##"})",
                                 json::parse(R"({"a": 0, "##b": 1, "##c": 2, "ab": 3, "abc": 4, "b": 5})"),
                                 json::parse(R"(["a ##b", "ab ##c"])"))));
  EXPECT_EQ(prefixed.encode("abc"), ids({4}));
  EXPECT_EQ(prefixed.encode("bc ab"), ids({5, 2, 3}));

  const Tokenizer suffixed = Tokenizer::fromPath(writeTokenizer(
      "suffix", subwordTokenizer(R"({"end_of_word_suffix": "</w>"})",
                                 json::parse(R"({"a": 0, "b": 1, "c</w>": 2, "ab": 3, "abc</w>": 4, "b</w>": 5})"),
                                 json::parse(R"(["a b", "ab c</w>"])"))));
  EXPECT_EQ(suffixed.encode("abc ab"), ids({4, 0, 5}));
  EXPECT_EQ(suffixed.decode({4, 0, 5}), "abc ab");
  // Without unk_token an unknown character is dropped, as in the Rust library.
  EXPECT_EQ(suffixed.encode("axc"), ids({0, 2}));
}

// --- pre-tokenizers ------------------------------------------------------------------------------------

std::vector<std::string> preTokenize(const std::string& spec, const std::string& text, bool atStart = true) {
  const tok::ConfigContext ctx("inline.json");
  const auto pre = tok::makePreTokenizer(json::parse(spec), ctx);
  std::vector<tok::Split> splits{{text, atStart}};
  pre->preTokenize(splits);
  std::vector<std::string> out;
  for (const auto& s : splits) out.push_back(s.text);
  return out;
}

using Strings = std::vector<std::string>;

std::string splitSpec(const std::string& behavior, bool invert, const std::string& pattern = R"({"String": "-"})") {
  return R"({"type": "Split", "pattern": )" + pattern + R"(, "behavior": ")" + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

TEST(TokenizerPreTokenizers, SplitBehaviours) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(preTokenize(splitSpec("Removed", false), text), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(preTokenize(splitSpec("Isolated", false), text), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(preTokenize(splitSpec("MergedWithPrevious", false), text),
            (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(preTokenize(splitSpec("MergedWithNext", false), text), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(preTokenize(splitSpec("Contiguous", false), text), (Strings{"the", "-", "final", "--", "countdown"}));
  // A regex pattern behaves the same.
  EXPECT_EQ(preTokenize(splitSpec("Contiguous", false, R"({"Regex": "-"})"), text),
            (Strings{"the", "-", "final", "--", "countdown"}));
}

TEST(TokenizerPreTokenizers, SplitInvert) {
  const std::string words = R"({"Regex": "\\w+"})";
  EXPECT_EQ(preTokenize(splitSpec("Removed", true, words), "Hello World!"), (Strings{"Hello", "World"}));
  EXPECT_EQ(preTokenize(splitSpec("Removed", false, words), "Hello World!"), (Strings{" ", "!"}));
  EXPECT_EQ(preTokenize(splitSpec("Isolated", true, words), "Hello World!"), (Strings{"Hello", " ", "World", "!"}));
  EXPECT_EQ(preTokenize(splitSpec("MergedWithNext", false, words), "Hello World!"), (Strings{"Hello ", "World!"}));
  EXPECT_EQ(preTokenize(splitSpec("MergedWithNext", true, words), "Hello World!"),
            (Strings{"Hello", " World", "!"}));
}

TEST(TokenizerPreTokenizers, GptStyleRegexAndByteLevel) {
  // \s+(?!\S) leaves the last space to the next word; (?i:'s) is case-insensitive; \p{L} covers Greek.
  const std::string llama = R"({"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false})";
  EXPECT_EQ(preTokenize(llama, "IT'S  12345 Ελλάδα\n\nx"),
            (Strings{"IT", "'S", " ", " ", "123", "45", " Ελλάδα", "\n\n", "x"}));
  EXPECT_EQ(preTokenize(R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
                        "Hello my friend, how is your day going?"),
            (Strings{"ĠHello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}));
  EXPECT_EQ(preTokenize(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})", "a b\n"),
            (Strings{"aĠbĊ"}));
}

TEST(TokenizerPreTokenizers, MetaspaceDigitsWhitespacePunctuationSequence) {
  EXPECT_EQ(preTokenize(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true})",
                        "Hey friend!"),
            (Strings{"▁Hey", "▁friend!"}));
  EXPECT_EQ(preTokenize(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": true})",
                        "Hey   friend!"),
            (Strings{"Hey", "▁", "▁", "▁friend!"}));
  EXPECT_EQ(preTokenize(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})",
                        "Hey friend!"),
            (Strings{"▁Hey▁friend!"}));
  // "first" only prepends to the piece at the start of the input (not to text after a leading added token).
  const std::string first = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})";
  EXPECT_EQ(preTokenize(first, "Hey", true), (Strings{"▁Hey"}));
  EXPECT_EQ(preTokenize(first, "Hey", false), (Strings{"Hey"}));

  EXPECT_EQ(preTokenize(R"({"type": "Digits", "individual_digits": true})", "Hey 123 friend!"),
            (Strings{"Hey ", "1", "2", "3", " friend!"}));
  EXPECT_EQ(preTokenize(R"({"type": "Digits", "individual_digits": false})", "Hey 123 friend!"),
            (Strings{"Hey ", "123", " friend!"}));
  EXPECT_EQ(preTokenize(R"({"type": "Whitespace"})", "How are you doing?"),
            (Strings{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(preTokenize(R"({"type": "WhitespaceSplit"})", "Hey man!"), (Strings{"Hey", "man!"}));
  EXPECT_EQ(preTokenize(R"({"type": "Punctuation", "behavior": "Isolated"})", "Hey friend!     How are you?!?"),
            (Strings{"Hey friend", "!", "     How are you", "?", "!", "?"}));
  EXPECT_EQ(preTokenize(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                                   {"type": "Digits", "individual_digits": true}]})",
                        "Hey 12"),
            (Strings{"Hey", "1", "2"}));
}

TEST(TokenizerPreTokenizers, CatastrophicBacktrackingIsStopped) {
  const std::string evil = R"({"type": "Split", "pattern": {"Regex": "(x+x+)+[yz]"}, "behavior": "Isolated", "invert": false})";
  try {
    preTokenize(evil, std::string(5000, 'x'));
    FAIL() << "expected the regex match limit to stop the search";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("inline.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(x+x+)+[yz]"), std::string::npos) << e.what();
  }
}

TEST(TokenizerPreTokenizers, OnigurumaConstructsAreTranslated) {
  EXPECT_EQ(tok::Regex::translateOniguruma(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
  EXPECT_EQ(tok::Regex::translateOniguruma(R"((?m:.)\u00e9)"), R"((?s:.)\x{00e9})");
  EXPECT_EQ(tok::Regex::translateOniguruma(R"([\s\p{L}])"), R"([\p{White_Space}\p{L}])");
  EXPECT_EQ(tok::Regex::translateOniguruma(R"(\h+)"), R"([0-9a-fA-F]+)");
}

// --- normalizers and decoders ---------------------------------------------------------------------------

std::string normalize(const std::string& spec, std::string text) {
  const tok::ConfigContext ctx("inline.json");
  tok::makeNormalizer(json::parse(spec), ctx)->normalize(text);
  return text;
}

TEST(TokenizerNormalizers, Unicode) {
  EXPECT_EQ(normalize(R"({"type": "NFC"})", "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize(R"({"type": "NFD"})", "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", "ｆｕｌｌ"), "full");
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]})",
                      "HÉLLO"),
            "hello");
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "İ"), "i\xCC\x87");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})", " \u3000 hi \n"), "hi");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": false, "strip_right": true})", "  hi  "), "  hi");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})", "a  b    c"), "a b c");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "▁"})", "a"), "▁a");
}

std::string decodeTokens(const std::string& spec, std::vector<std::string> tokens) {
  const tok::ConfigContext ctx("inline.json");
  tok::makeDecoder(json::parse(spec), ctx)->decodeChain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(TokenizerDecoders, ByteLevelIsLossyLikeRust) {
  const std::string bl = R"({"type": "ByteLevel"})";
  const std::string f0 = tok::byteToChar(0xF0);
  const std::string x9f = tok::byteToChar(0x9F);
  // F0 9F is the start of a 4-byte sequence: one U+FFFD for the whole truncated sequence.
  EXPECT_EQ(decodeTokens(bl, {f0, x9f}), "\xEF\xBF\xBD");
  EXPECT_EQ(decodeTokens(bl, {f0, "A"}), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(decodeTokens(bl, {"ĠHello", "<|im_start|>"}), " Hello<|im_start|>");
  // A token with a character outside the byte table passes through as text.
  EXPECT_EQ(decodeTokens(bl, {"日本", "Ġx"}), "日本 x");
}

TEST(TokenizerDecoders, MetaspaceStripReplace) {
  EXPECT_EQ(decodeTokens(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true})",
                         {"▁Hey", "▁friend!"}),
            "Hey friend!");
  EXPECT_EQ(decodeTokens(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": true})",
                         {"▁Hey", "▁friend!"}),
            " Hey friend!");
  EXPECT_EQ(decodeTokens(R"({"type": "Strip", "content": " ", "start": 1, "stop": 1})", {"  a  ", "b"}), " a b");
  EXPECT_EQ(decodeTokens(R"({"type": "Replace", "pattern": {"String": "▁"}, "content": " "})", {"▁a▁b"}), " a b");
}

// --- refusals -------------------------------------------------------------------------------------------

void expectRefused(const std::string& name, const json& j, const std::vector<std::string>& mentions) {
  std::string path;
  const std::string msg = loadError(name, j, &path);
  ASSERT_FALSE(msg.empty()) << name << ": expected an InputError";
  EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
  for (const auto& m : mentions) EXPECT_NE(msg.find(m), std::string::npos) << "message lacks '" << m << "': " << msg;
}

TEST(TokenizerRefusals, UnknownComponentTypesNameTypeAndFile) {
  json j = addedTokensTokenizer();
  j["pre_tokenizer"] = json::parse(R"({"type": "FancyThing"})");
  expectRefused("unknown-pre", j, {"pre_tokenizer", "FancyThing"});

  j = addedTokensTokenizer();
  j["normalizer"] = json::parse(R"({"type": "Precompiled", "precompiled_charsmap": "AAAA"})");
  expectRefused("unknown-norm", j, {"normalizer", "Precompiled"});

  j = addedTokensTokenizer();
  j["decoder"] = json::parse(R"({"type": "CTC"})");
  expectRefused("unknown-dec", j, {"decoder", "CTC"});

  j = addedTokensTokenizer();
  j["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [{"type": "Mystery"}]})");
  expectRefused("unknown-post", j, {"post_processor", "Mystery"});

  j = addedTokensTokenizer();
  j["model"]["type"] = "WordPiece";
  expectRefused("unknown-model", j, {"model", "WordPiece"});

  j = addedTokensTokenizer();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated", "invert": false})");
  expectRefused("bad-regex", j, {"Split", "invalid regex"});

  j = addedTokensTokenizer();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"String": "-"}, "behavior": "Sideways", "invert": false})");
  expectRefused("bad-behavior", j, {"Sideways"});

  j = addedTokensTokenizer();
  j["model"]["dropout"] = 0.1;
  expectRefused("dropout", j, {"dropout"});
}

TEST(TokenizerRefusals, MalformedMerges) {
  json j = addedTokensTokenizer();
  j["model"]["merges"] = json::parse(R"(["a b", "ab c d"])");
  expectRefused("merges-3", j, {"merges[1]", "ab c d"});

  j = addedTokensTokenizer();
  j["model"]["merges"] = json::parse(R"([["a"]])");
  expectRefused("merges-pair", j, {"merges[0]"});

  j = addedTokensTokenizer();
  j["model"]["merges"] = json::parse(R"(["a q"])");
  expectRefused("merges-oov", j, {"merges[0]", "'q'"});

  j = addedTokensTokenizer();
  j["model"]["merges"] = json::parse(R"(["b c"])");  // "bc" is not in the vocabulary
  expectRefused("merges-result", j, {"merges[0]", "'bc'"});
}

TEST(TokenizerRefusals, MissingAndBrokenFiles) {
  EXPECT_THROW(Tokenizer::fromPath("/nonexistent/tokenizer.json"), InputError);
  const std::string dir = pareto::test::scratchDir("tokenizer-empty-folder");
  try {
    Tokenizer::fromPath(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos);
  }
  const std::string broken = dir + "/tokenizer.json";
  std::ofstream(broken) << "{ not json";
  EXPECT_THROW(Tokenizer::fromPath(broken), InputError);
}

TEST(TokenizerRefusals, InvalidUtf8Input) {
  const Tokenizer t = Tokenizer::fromPath(writeTokenizer("added", addedTokensTokenizer()));
  EXPECT_THROW(t.encode("ab\xFF"), InputError);
}

}  // namespace
