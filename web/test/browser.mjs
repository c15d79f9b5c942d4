// Launches Debian's Chromium through playwright-core with a fresh profile
// and no background network traffic.
import { chromium } from "playwright-core";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

// opts go to launchPersistentContext (e.g. httpCredentials).
export async function launch(viewport = { width: 1400, height: 900 }, opts = {}) {
  const profile = await mkdtemp(path.join(tmpdir(), "vigil-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    viewport,
    ...opts,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const close = async () => {
    await ctx.close();
    await rm(profile, { recursive: true, force: true });
  };
  return { ctx, page, close };
}

export function check(cond, msg) {
  if (!cond) throw new Error("check failed: " + msg);
  console.log("ok  " + msg);
}
