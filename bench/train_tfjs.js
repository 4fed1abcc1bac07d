// The TensorFlow.js side of bench/run_train.sh: the Keras version of `nabla train` (dense 128
// relu, dense 10, Adam 1e-3 — TF.js has no AdamW —, batch 64, one epoch) on the fastest backend
// that installs here, and the time from process start to the first training step.
const T0 = Date.now();
const zlib = require('zlib');
const fs = require('fs');
let tf;
try { tf = require('@tensorflow/tfjs-node'); } catch (e) { tf = require('@tensorflow/tfjs'); }
const root = process.argv[2] || '/usr/share/datasets/fashion-mnist';
function idx(name, images) {
  const data = zlib.gunzipSync(fs.readFileSync(`${root}/${name}`));
  const off = images ? 16 : 8;
  const bytes = data.subarray(off);
  if (!images) return tf.tensor1d(Int32Array.from(bytes), 'int32');
  const f = new Float32Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) f[i] = bytes[i] / 255;
  return tf.tensor2d(f, [bytes.length / 784, 784]);
}
(async () => {
  await tf.ready();
  const xt = idx('train-images-idx3-ubyte.gz', true), yt = tf.oneHot(idx('train-labels-idx1-ubyte.gz', false), 10);
  const xs = idx('t10k-images-idx3-ubyte.gz', true), ys = idx('t10k-labels-idx1-ubyte.gz', false);
  const model = tf.sequential();
  model.add(tf.layers.dense({ inputShape: [784], units: 128, activation: 'relu' }));
  model.add(tf.layers.dense({ units: 10 }));
  model.compile({ optimizer: tf.train.adam(1e-3), loss: (y, p) => tf.losses.softmaxCrossEntropy(y, p) });
  let first = null;
  const t = Date.now();
  await model.fit(xt, yt, { batchSize: 64, epochs: 1, shuffle: true, verbose: 0,
    callbacks: { onBatchEnd: async () => { if (first === null) first = (Date.now() - T0) / 1000; } } });
  const epoch = (Date.now() - t) / 1000;
  const acc = (await model.predict(xs).argMax(1).equal(ys).mean().data())[0];
  console.log(`tfjs_backend ${tf.getBackend()}`);
  console.log(`tfjs_startup_to_first_step_s ${first.toFixed(4)}`);
  console.log(`tfjs_epoch_s ${epoch.toFixed(4)}`);
  console.log(`tfjs_test_accuracy ${acc.toFixed(4)}`);
})();
