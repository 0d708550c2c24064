import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// The admin API serves the build from its package data (baobab/admin/web_dist), so
// `pip install -e .` and a wheel both carry the UI; `npm run dev` proxies /api to a
// running `baobab up` (BAOBAB_URL, default http://127.0.0.1:8100).
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: "../baobab/admin/web_dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1200,
  },
  server: {
    proxy: { "/api": process.env.BAOBAB_URL ?? "http://127.0.0.1:8100" },
  },
  test: {
    environment: "jsdom",
    globals: true,
    setupFiles: ["./src/test/setup.ts"],
    css: false,
  },
});
