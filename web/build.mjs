// Builds the dashboard into ../internal/web/dist (embedded by the Go
// package), or with --tests the unit tests into build/test for node --test.
import * as esbuild from "esbuild";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "..", "internal", "web", "dist");

if (process.argv.includes("--tests")) {
  const dir = path.join(here, "test", "unit");
  const entries = (await readdir(dir)).filter((f) => f.endsWith(".test.ts")).map((f) => path.join(dir, f));
  const out = path.join(here, "build", "test");
  await rm(out, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: entries, bundle: true, platform: "node", format: "esm", target: "node20",
    outdir: out, outExtension: { ".js": ".mjs" }, logLevel: "warning",
  });
} else {
  await mkdir(dist, { recursive: true });
  // Remove the previous build but keep the committed placeholder.
  for (const f of await readdir(dist)) if (f !== ".keep") await rm(path.join(dist, f), { recursive: true });
  await esbuild.build({
    entryPoints: { app: path.join(here, "src", "main.ts") },
    bundle: true, minify: true, format: "iife", target: ["chrome110", "firefox110", "safari16"],
    outdir: dist, logLevel: "warning", legalComments: "eof",
  });
  for (const f of ["index.html", "favicon.svg"]) await copyFile(path.join(here, "src", f), path.join(dist, f));
  console.log("built", path.relative(process.cwd(), dist), (await readdir(dist)).join(" "));
}
