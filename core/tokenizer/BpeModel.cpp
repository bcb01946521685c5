#include "tokenizer/BpeModel.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/ConfigContext.h"
#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

namespace {

constexpr size_t kMaxCachedWordBytes = 256;
// Ids index a dense table, so one entry with id 2^31 would allocate tens of gigabytes (found by fuzz_tokenizer).
// Real vocabularies stop near 260k; this matches config.json's vocab_size bound (ModelConfig.cpp).
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;
constexpr size_t kMaxCacheEntries = 200'000;

struct Symbol {
  uint32_t id;
  int prev;
  int next;
  size_t len;  // bytes of the word this symbol covers; 0 once merged into its left neighbour
};

struct Candidate {
  uint32_t rank;
  uint32_t pos;
  uint32_t newId;
};

// Lowest rank first, then leftmost (the Rust library's Ord for Merge).
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const ConfigContext& ctx) : context_(ctx.file()) {
  const std::string what = "model BPE";
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && (!dropout->is_number() || dropout->get<double>() != 0.0))
    ctx.fail(what + ": 'dropout' is set; BPE dropout makes encoding random and is not supported");

  const auto& vocab = ctx.field(model, "vocab", what);
  if (!vocab.is_object()) ctx.fail(what + ": 'vocab' must be an object of token -> id");
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
      ctx.fail(what + ": vocab entry '" + it.key() + "' has no valid id");
    if (it.value().get<int64_t>() > kMaxTokenId)
      ctx.fail(what + ": vocab entry '" + it.key() + "' has id " + it.value().dump() +
               ", beyond the largest supported vocabulary (ids up to " + std::to_string(kMaxTokenId) + ")");
    ctx.checkTokenLength(it.key(), what + ": a vocab entry");
    const auto id = static_cast<uint32_t>(it.value().get<int64_t>());
    vocab_[it.key()] = id;
    if (id >= idToToken_.size()) {
      idToToken_.resize(id + 1);
      hasId_.resize(id + 1, 0);
    }
    idToToken_[id] = it.key();
    hasId_[id] = 1;
  }

  unkToken_ = ctx.optString(model, "unk_token", what);
  continuingSubwordPrefix_ = ctx.optString(model, "continuing_subword_prefix", what);
  endOfWordSuffix_ = ctx.optString(model, "end_of_word_suffix", what);
  fuseUnk_ = ctx.boolean(model, "fuse_unk", what, false);
  byteFallback_ = ctx.boolean(model, "byte_fallback", what, false);
  ignoreMerges_ = ctx.boolean(model, "ignore_merges", what, false);

  const auto& merges = ctx.array(model, "merges", what);
  merges_.reserve(merges.size());
  const size_t prefixLen = continuingSubwordPrefix_ ? continuingSubwordPrefix_->size() : 0;
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& m = merges[i];
    const std::string where = what + ": merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      // The Rust library skips a "#version" header line in the string form.
      if (line.rfind("#version", 0) == 0) continue;
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        ctx.fail(where + " is '" + line + "'; expected two tokens separated by one space");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      ctx.fail(where + " is " + m.dump() + "; expected \"a b\" or [\"a\", \"b\"]");
    }
    ctx.checkTokenLength(a, where + ": the first token");
    ctx.checkTokenLength(b, where + ": the second token");
    const auto ia = vocab_.find(a);
    const auto ib = vocab_.find(b);
    if (ia == vocab_.end()) ctx.fail(where + ": token '" + a + "' is not in the vocabulary");
    if (ib == vocab_.end()) ctx.fail(where + ": token '" + b + "' is not in the vocabulary");
    if (b.size() < prefixLen) ctx.fail(where + ": token '" + b + "' is shorter than continuing_subword_prefix");
    const std::string merged = a + b.substr(prefixLen);
    const auto im = vocab_.find(merged);
    if (im == vocab_.end()) ctx.fail(where + ": merged token '" + merged + "' is not in the vocabulary");
    // A repeated pair keeps its last rank, as collecting into a HashMap does.
    merges_[pairKey(ia->second, ib->second)] = Merge{rank, im->second};
    ++rank;
  }
}

std::optional<int64_t> BpeModel::tokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::idToToken(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(idToToken_.size()) || hasId_[static_cast<size_t>(id)] == 0)
    return nullptr;
  return &idToToken_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  const std::string key(word);
  if (ignoreMerges_) {
    auto it = vocab_.find(key);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> ids;
  mergeWord(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(key, std::move(ids));
  }
}

uint32_t BpeModel::unkId() const {
  auto it = vocab_.find(*unkToken_);
  if (it == vocab_.end())
    throw InputError(fileMessage(context_, "model BPE: unk_token '" + *unkToken_ + "' is not in the vocabulary"));
  return it->second;
}

void BpeModel::mergeWord(std::string_view word, std::vector<int64_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](uint32_t id, size_t len) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, -1, len});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
  };

  // A pending unknown (id, byte length), kept open so that fuse_unk can extend it.
  bool haveUnk = false;
  uint32_t unkIdPending = 0;
  size_t unkLen = 0;
  std::string s;
  for (size_t i = 0; i < word.size();) {
    const size_t begin = i;
    nextCodePoint(word, i);
    const size_t byteLen = i - begin;
    s.assign(word.substr(begin, byteLen));
    if (begin != 0 && continuingSubwordPrefix_) s.insert(0, *continuingSubwordPrefix_);
    if (i == word.size() && endOfWordSuffix_) s += *endOfWordSuffix_;

    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      if (haveUnk) {
        add(unkIdPending, unkLen);
        haveUnk = false;
      }
      add(it->second, byteLen);
      continue;
    }
    if (byteFallback_) {
      std::vector<uint32_t> bytes;
      bool all = true;
      for (unsigned char b : s) {
        char code[8];
        std::snprintf(code, sizeof code, "<0x%02X>", b);
        auto bt = vocab_.find(code);
        if (bt == vocab_.end()) {
          all = false;
          break;
        }
        bytes.push_back(bt->second);
      }
      if (all) {
        // As in the Rust library, a pending unknown is not flushed before the byte tokens.
        for (uint32_t id : bytes) add(id, 1);
        continue;
      }
    }
    if (unkToken_) {
      if (haveUnk && fuseUnk_) {
        unkLen += byteLen;
      } else {
        if (haveUnk) add(unkIdPending, unkLen);
        unkIdPending = unkId();
        unkLen = byteLen;
        haveUnk = true;
      }
    }
    // Without unk_token an unknown character is dropped, as the Rust library does.
  }
  if (haveUnk) add(unkIdPending, unkLen);

  std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    auto m = merges_.find(pairKey(symbols[k].id, symbols[k + 1].id));
    if (m != merges_.end()) queue.push(Candidate{m->second.rank, static_cast<uint32_t>(k), m->second.newId});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const auto nextPos = static_cast<size_t>(cur.next);
    const Symbol right = symbols[nextPos];
    // Stale entry: the pair at this position changed since it was queued.
    auto m = merges_.find(pairKey(cur.id, right.id));
    if (m == merges_.end() || m->second.newId != top.newId) continue;

    cur.id = top.newId;
    cur.len += right.len;
    cur.next = right.next;
    symbols[nextPos].len = 0;
    if (right.next > -1 && static_cast<size_t>(right.next) < symbols.size())
      symbols[static_cast<size_t>(right.next)].prev = static_cast<int>(top.pos);

    if (cur.prev >= 0) {
      const Symbol& prev = symbols[static_cast<size_t>(cur.prev)];
      auto pm = merges_.find(pairKey(prev.id, cur.id));
      if (pm != merges_.end())
        queue.push(Candidate{pm->second.rank, static_cast<uint32_t>(cur.prev), pm->second.newId});
    }
    if (cur.next >= 0 && static_cast<size_t>(cur.next) < symbols.size()) {
      const Symbol& next = symbols[static_cast<size_t>(cur.next)];
      auto nm = merges_.find(pairKey(cur.id, next.id));
      if (nm != merges_.end()) queue.push(Candidate{nm->second.rank, top.pos, nm->second.newId});
    }
  }
  for (const Symbol& sym : symbols)
    if (sym.len != 0) out.push_back(sym.id);
}

}  // namespace pareto::tok
