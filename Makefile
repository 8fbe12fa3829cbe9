# Shortcuts for the commands the README gives; `make install PREFIX=/opt/securepush`.
PREFIX ?= /usr/local

.PHONY: build test install

build:
	swift build -c release --product securepush

test:
	swift test

install:
	scripts/install.sh $(PREFIX)
