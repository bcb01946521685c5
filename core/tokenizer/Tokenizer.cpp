#include "tokenizer/Tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tokenizer/AddedTokens.h"
#include "tokenizer/BpeModel.h"
#include "tokenizer/ConfigContext.h"
#include "tokenizer/Decoders.h"
#include "tokenizer/Normalizers.h"
#include "tokenizer/PostProcessors.h"
#include "tokenizer/PreTokenizers.h"
#include "tokenizer/Unicode.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

struct Tokenizer::Impl {
  std::string path;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> preTokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> postProcessor;
  std::unique_ptr<tok::Decoder> decoder;
  std::optional<tok::Truncation> truncation;
  std::optional<tok::Padding> padding;
  tok::AddedTokens added;
};

namespace {

// A component that may be null (absent) in tokenizer.json.
const nlohmann::json* component(const nlohmann::json& root, const char* key) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string resolvePath(const std::string& fileOrModelDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(fileOrModelDir, ec)) {
    const std::string file = (fs::path(fileOrModelDir) / "tokenizer.json").string();
    if (!fs::exists(file, ec))
      throw InputError(fileMessage(fileOrModelDir, "model folder has no tokenizer.json"));
    return file;
  }
  if (!fs::exists(fileOrModelDir, ec))
    throw InputError(fileMessage(fileOrModelDir, "no such file (expected a tokenizer.json or a model folder)"));
  return fileOrModelDir;
}

}  // namespace

Tokenizer Tokenizer::fromPath(const std::string& fileOrModelDir) {
  const std::string path = resolvePath(fileOrModelDir);
  return fromJson(readJsonFile(path, kMaxTokenizerJsonBytes, "a tokenizer.json"), path);
}

std::vector<TokenId> encodeTextFile(const Tokenizer& tokenizer, const std::string& path, bool addSpecialTokens) {
  const std::string text = readTextFile(path);
  try {
    return tokenizer.encode(text, addSpecialTokens);
  } catch (const InputError& e) {
    throw InputError(fileMessage(path, e.what()));
  }
}

Tokenizer Tokenizer::fromJson(const nlohmann::json& root, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->path = source;
  const tok::ConfigContext ctx(impl->path);
  if (!root.is_object()) ctx.fail("not a tokenizer.json (the top level is not an object)");

  const nlohmann::json* model = component(root, "model");
  if (model == nullptr) ctx.fail("not a tokenizer.json (no 'model')");
  if (!model->is_object()) ctx.fail("'model' must be an object");
  // Files written by old versions of the library may leave out the model type; BPE is the one with merges.
  const std::string modelType =
      model->contains("type") ? ctx.type(*model, "model") : (model->contains("merges") ? "BPE" : "");
  if (modelType != "BPE")
    ctx.fail("unsupported model type '" + (modelType.empty() ? std::string("(none)") : modelType) +
             "' (supported: BPE)");
  impl->model = std::make_unique<tok::BpeModel>(*model, ctx);

  if (const auto* j = component(root, "normalizer")) impl->normalizer = tok::makeNormalizer(*j, ctx);
  if (const auto* j = component(root, "pre_tokenizer")) impl->preTokenizer = tok::makePreTokenizer(*j, ctx);
  if (const auto* j = component(root, "post_processor")) impl->postProcessor = tok::makePostProcessor(*j, ctx);
  if (const auto* j = component(root, "decoder")) impl->decoder = tok::makeDecoder(*j, ctx);
  if (const auto* j = component(root, "truncation")) impl->truncation = tok::readTruncation(*j, ctx);
  if (const auto* j = component(root, "padding")) impl->padding = tok::readPadding(*j, ctx);
  if (const auto* j = component(root, "added_tokens")) {
    const tok::BpeModel& bpe = *impl->model;
    impl->added = tok::AddedTokens(
        *j, ctx, impl->normalizer.get(), [&bpe](const std::string& t) { return bpe.tokenToId(t); },
        static_cast<int64_t>(bpe.vocabCount()));
  }
  // The ids the post-processor and the padding add come straight from the file: one outside the vocabulary would
  // index past the embedding (fuzz_tokenizer checks every encoded id). An empty sequence shows every id the
  // post-processor adds.
  std::vector<TokenId> added;
  if (impl->postProcessor) impl->postProcessor->process(added, /*addSpecialTokens=*/true);
  if (impl->padding) added.push_back(impl->padding->padId);
  const TokenId size = std::max(impl->model->maxId(), impl->added.maxId()) + 1;
  for (TokenId id : added)
    if (id < 0 || id >= size)
      ctx.fail("the post_processor or padding adds token id " + std::to_string(id) + ", outside the vocabulary of " +
               std::to_string(size) + " tokens");
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const {
  if (const auto bad = tok::firstInvalidUtf8(text))
    throw InputError("text to encode is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  std::vector<TokenId> ids;
  std::vector<tok::Split> splits;
  for (tok::TextPiece& piece : impl_->added.extractAndNormalize(text, impl_->normalizer.get())) {
    if (piece.id) {
      ids.push_back(*piece.id);
      continue;
    }
    splits.clear();
    splits.push_back(tok::Split{std::move(piece.text), piece.atOriginalStart});
    if (impl_->preTokenizer) impl_->preTokenizer->preTokenize(splits);
    for (const tok::Split& s : splits) impl_->model->tokenize(s.text, ids);
  }
  if (impl_->truncation)
    tok::truncate(ids, *impl_->truncation,
                  addSpecialTokens && impl_->postProcessor ? impl_->postProcessor->addedCount() : 0);
  if (impl_->postProcessor) impl_->postProcessor->process(ids, addSpecialTokens);
  if (impl_->padding) tok::pad(ids, *impl_->padding);
  return ids;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skipSpecialTokens) const {
  const auto size = static_cast<TokenId>(vocabSize());
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (id < 0 || id >= size)
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary of " + impl_->path +
                       " (size " + std::to_string(size) + ")");
    if (const tok::AddedToken* a = impl_->added.byId(id)) {
      if (!(skipSpecialTokens && impl_->added.isSpecial(a->content))) tokens.push_back(a->content);
      continue;
    }
    // An id in a hole of the vocabulary yields nothing, as in the Rust library.
    if (const std::string* t = impl_->model->idToToken(id)) {
      if (!(skipSpecialTokens && impl_->added.isSpecial(*t))) tokens.push_back(*t);
    }
  }
  if (impl_->decoder) impl_->decoder->decodeChain(tokens);
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && !impl_->decoder) out += ' ';
    out += tokens[i];
  }
  return out;
}

std::optional<TokenId> Tokenizer::tokenToId(std::string_view token) const {
  if (auto id = impl_->added.tokenToId(token)) return id;
  return impl_->model->tokenToId(token);
}

std::optional<std::string> Tokenizer::idToToken(TokenId id) const {
  if (const tok::AddedToken* a = impl_->added.byId(id)) return a->content;
  if (const std::string* t = impl_->model->idToToken(id)) return *t;
  return std::nullopt;
}

size_t Tokenizer::vocabSize() const {
  return static_cast<size_t>(std::max(impl_->model->maxId(), impl_->added.maxId()) + 1);
}

const std::string& Tokenizer::sourcePath() const { return impl_->path; }

}  // namespace pareto
