// Scores token ids with llama.cpp (through the npm package node-llama-cpp) for the GGUF check of test_gguf:
//   node score.mjs PACKAGE_DIR MODEL.gguf WINDOWS.json
// PACKAGE_DIR holds node_modules/node-llama-cpp (installed by scripts/setup.sh --llama-cpp into the build, never
// the repo). WINDOWS.json is [[id, ...], ...]: each window is scored alone from an empty context, without BOS,
// over its n − 1 next-token predictions; the raw softmax is read (temperature 1, no top-k/top-p/min-p cut).
// Prints {"mean_nll": ..., "tokens": ..., "windows": ...} on stdout.
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [packageDir, modelPath, windowsPath] = process.argv.slice(2);
if (!windowsPath) {
  console.error("usage: node score.mjs PACKAGE_DIR MODEL.gguf WINDOWS.json");
  process.exit(2);
}
const {getLlama} = await import(pathToFileURL(join(packageDir, "node_modules/node-llama-cpp/dist/index.js")).href);
const windows = JSON.parse(readFileSync(windowsPath, "utf8"));
// The prebuilt CPU binary only: a check must not depend on compiling llama.cpp on the test machine.
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const longest = Math.max(...windows.map((w) => w.length));
// One thread: ctest runs tests side by side, and llama.cpp's spinning worker threads slow to a crawl on shared cores.
const context = await model.createContext({contextSize: longest, batchSize: longest, sequences: 1, threads: 1});
const raw = {temperature: 1, topK: 0, topP: 1, minP: 0};
const sequence = context.getSequence();
let nll = 0, tokens = 0;
for (const ids of windows) {
  await sequence.clearHistory();
  const items = ids.map((id, i) => (i + 1 < ids.length ? [id, {generateNext: {probabilities: true, options: raw}}] : id));
  const out = await sequence.controlledEvaluate(items);
  for (let i = 0; i + 1 < ids.length; ++i) {
    const p = out[i].next.probabilities.get(ids[i + 1]) ?? 0;
    nll += -Math.log(Math.max(p, 1e-30));
    ++tokens;
  }
}
console.log(JSON.stringify({mean_nll: nll / tokens, tokens, windows: windows.length}));
await context.dispose();
await model.dispose();
