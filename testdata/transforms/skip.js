// A transform that skips every request.
module.exports = function skip() {
  return null;
};
