// Renders LaTeX with KaTeX, as docs sites do: one JSON string per input line, one answer
// per output line ("ok", or "error: <KaTeX's message>").
const katex = require(process.argv[2]);
const readline = require("readline");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  try {
    katex.renderToString(JSON.parse(line), { displayMode: true, throwOnError: true, strict: "error" });
    console.log("ok");
  } catch (e) {
    console.log("error: " + String(e.message).replace(/\n/g, " "));
  }
});
