// Classifies images with a TF.js graph model in Node, using only the pure-JS
// @tensorflow/tfjs package (CPU backend, no native binding), as a browser would.
//
//   node predict.js MODEL_DIR SAMPLES_JSON
//
// SAMPLES_JSON: {"shape": [height, width, channels], "pixels": [[...], ...]} with
// each image's raw pixels, flat. Prints {"backend", "probabilities": [[...], ...]}.
const fs = require("fs");
const path = require("path");
const tf = require("@tensorflow/tfjs");

// Pure tfjs has no file:// loader in Node; read model.json and its weight files ourselves.
function loadFromDisk(modelDir) {
  const manifest = JSON.parse(fs.readFileSync(path.join(modelDir, "model.json"), "utf8"));
  const groups = manifest.weightsManifest;
  const weights = groups.flatMap((group) => group.paths.map((p) => fs.readFileSync(path.join(modelDir, p))));
  return tf.io.fromMemory({
    modelTopology: manifest.modelTopology,
    weightSpecs: groups.flatMap((group) => group.weights),
    weightData: new Uint8Array(Buffer.concat(weights)).buffer,
    signature: manifest.signature,
  });
}

async function main() {
  const [modelDir, samplesPath] = process.argv.slice(2);
  const model = await tf.loadGraphModel(loadFromDisk(modelDir));
  const samples = JSON.parse(fs.readFileSync(samplesPath, "utf8"));
  const images = tf.tensor(samples.pixels, [samples.pixels.length, ...samples.shape], "float32");
  const probabilities = await model.predict(images).array();
  process.stdout.write(JSON.stringify({ backend: tf.getBackend(), probabilities }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
