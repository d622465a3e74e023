#!/usr/bin/env python3
"""Turns template.yaml into the release template: the one a user deploys with `sam deploy`
next to the release zip, without Rust or a build.

What changes, and only that (each edit must match exactly once, so a template whose shape moved
fails here instead of shipping a template that still wants a build):
- Globals' `CodeUri: .` points at the zip (`sam deploy` uploads a local zip as it is);
- both functions lose their `BuildMethod: rust-cargolambda` build metadata;
- `Architecture` allows only arm64, the zip's architecture;
- the Serverless Application Repository's SemanticVersion is the release's version;
- with SOURCE_URL, the application's HomePageUrl and SourceCodeUrl are that URL (the repository
  the release is published from: template.yaml names none, rather than a made-up one).

usage: release_template.py TEMPLATE VERSION ZIP_NAME [SOURCE_URL] > OUT
"""

import re
import sys

SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")


def replace_once(text: str, old: str, new: str, what: str, count: int = 1) -> str:
    found = text.count(old)
    if found != count:
        sys.exit(f"release_template: expected {count} x {what} in the template, found {found}")
    return text.replace(old, new)


def release_template(text: str, version: str, zip_name: str, source_url: str = "") -> str:
    if not SEMVER.match(version):
        sys.exit(f"release_template: VERSION {version!r} is not a semantic version (x.y.z)")
    text = replace_once(text, "\n    CodeUri: .\n", f"\n    CodeUri: {zip_name}\n",
                        "Globals CodeUri: .")
    text = replace_once(
        text,
        "      BuildMethod: rust-cargolambda\n      BuildProperties:\n        Binary: prewarm\n",
        "",
        "the functions' cargo-lambda build metadata",
        count=2,
    )
    text = replace_once(text, "    Default: arm64\n    AllowedValues: [arm64, x86_64]\n",
                        "    Default: arm64\n    AllowedValues: [arm64]\n",
                        "the Architecture parameter")
    text, n = re.subn(r"(?m)^(    SemanticVersion: ).*$", rf"\g<1>{version}", text)
    if n != 1:
        sys.exit(f"release_template: expected one SemanticVersion, found {n}")
    if source_url:
        if not re.fullmatch(r"https://[^\s'\"]+", source_url):
            sys.exit(f"release_template: SOURCE_URL {source_url!r} is not an https:// URL")
        text = replace_once(text, f"    SemanticVersion: {version}\n",
                            f"    SemanticVersion: {version}\n    HomePageUrl: {source_url}\n"
                            f"    SourceCodeUrl: {source_url}\n", "the SemanticVersion line")
    return text


def main() -> None:
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[-1])
    path, version, zip_name = sys.argv[1:4]
    source_url = sys.argv[4] if len(sys.argv) == 5 else ""
    with open(path, encoding="utf-8") as f:
        sys.stdout.write(release_template(f.read(), version, zip_name, source_url))


if __name__ == "__main__":
    main()
