// tokenize / detokenize: run a Hugging Face tokenizer.json from the command line, to check what ids a model
// will see for a text and what text a list of ids stands for.
#include <CLI/CLI.hpp>
#include <cctype>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto::cli {

namespace {

constexpr const char* kTokenizerHelp =
    "A model folder (its tokenizer.json is used) or a tokenizer.json file";

// "1,2,3", "1 2 3" or "[1, 2, 3]" (what `tokenize --json` prints) -> ids.
std::vector<TokenId> parseIds(const std::string& s) {
  std::vector<TokenId> ids;
  std::string item;
  auto flush = [&] {
    if (item.empty()) return;
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0) throw InputError("--ids: '" + item + "' is not a token id");
    ids.push_back(v);
    item.clear();
  };
  for (char c : s) {
    if (c == ',' || c == '[' || c == ']' || std::isspace(static_cast<unsigned char>(c)) != 0)
      flush();
    else
      item += c;
  }
  flush();
  return ids;
}

void addTokenize(CLI::App& app) {
  struct Args {
    std::string tokenizer;
    std::string text;
    std::string file;
    bool addSpecialTokens = false;
    bool showTokens = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Encode text into token ids with a Hugging Face tokenizer.json (ids match the `tokenizers` library)");
  cmd->add_option("--tokenizer", args->tokenizer, kTokenizerHelp)->required();
  CLI::Option_group* source = cmd->add_option_group("input", "The text to encode (exactly one of these)");
  CLI::Option* textOpt = source->add_option("--text", args->text, "The text itself");
  CLI::Option* fileOpt = source->add_option("--file", args->file, "A UTF-8 text file, encoded whole");
  textOpt->excludes(fileOpt);
  source->require_option(1);
  cmd->add_flag("--add-special-tokens", args->addSpecialTokens,
                "Apply the tokenizer's post-processor (e.g. prepend BOS), as transformers does by default");
  cmd->add_flag("--show-tokens", args->showTokens, "Text output: one line per token, 'id<TAB>token'");
  cmd->add_flag("--json", args->json, "Print one JSON object {ids, tokens, count, tokenizer} instead of text");
  cmd->callback([args] {
    const Tokenizer tok = Tokenizer::fromPath(args->tokenizer);
    const std::vector<TokenId> ids = args->file.empty() ? tok.encode(args->text, args->addSpecialTokens)
                                                        : encodeTextFile(tok, args->file, args->addSpecialTokens);
    nlohmann::json tokens = nlohmann::json::array();
    std::ostringstream text;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string token = tok.idToToken(ids[i]).value_or("");
      tokens.push_back(token);
      if (args->showTokens)
        text << (i ? "\n" : "") << ids[i] << '\t' << token;
      else
        text << (i ? " " : "") << ids[i];
    }
    const nlohmann::json result = {
        {"tokenizer", tok.sourcePath()}, {"count", ids.size()}, {"ids", ids}, {"tokens", tokens}};
    printResult(args->json, result, text.str());
  });
}

void addDetokenize(CLI::App& app) {
  struct Args {
    std::string tokenizer;
    std::string ids;
    bool skipSpecialTokens = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Decode token ids into text with a Hugging Face tokenizer.json");
  cmd->add_option("--tokenizer", args->tokenizer, kTokenizerHelp)->required();
  cmd->add_option("--ids", args->ids, "Token ids separated by commas or spaces, e.g. 9906,11,1917")->required();
  cmd->add_flag("--skip-special-tokens", args->skipSpecialTokens,
                "Leave out special tokens such as BOS/EOS, as decode(skip_special_tokens=True) does");
  cmd->add_flag("--json", args->json, "Print one JSON object {text, tokenizer} instead of the bare text");
  cmd->callback([args] {
    const Tokenizer tok = Tokenizer::fromPath(args->tokenizer);
    const std::string text = tok.decode(parseIds(args->ids), args->skipSpecialTokens);
    printResult(args->json, {{"tokenizer", tok.sourcePath()}, {"text", text}}, text);
  });
}

}  // namespace

void addTokenizeCommands(CLI::App& app) {
  addTokenize(app);
  addDetokenize(app);
}

}  // namespace pareto::cli
