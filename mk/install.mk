# SPDX-License-Identifier: Apache-2.0
# Installation and the container check; included by the Makefile.
#   make install [PREFIX=/usr/local] [DESTDIR=]   programs, man pages, unit,
#                                                 logrotate, and the config
#                                                 unless one is there already
#   make uninstall                                the same minus the config
#   make test-docker                              build and check the image
#   make test-fresh                               make demo and make test on a
#                                                 debootstrapped Debian 12

INSTALL     ?= install
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
SYSCONFDIR  ?= /etc
# Where systemd looks: /lib for the distribution's own prefix (merged-/usr
# makes it /usr/lib too), $(PREFIX)/lib for a local one.
ifeq ($(PREFIX),/usr)
UNITDIR     ?= /lib/systemd/system
else
UNITDIR     ?= $(PREFIX)/lib/systemd/system
endif
# The config that `make install` copies when none is installed.
INSTALL_CONF ?= conf/tokentap.yaml

.PHONY: install uninstall test-docker test-fresh

install: $(BINS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/tokentap \
	    $(DESTDIR)$(SYSCONFDIR)/logrotate.d
	$(INSTALL) -m 0755 $(BINS) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0644 man/tokentap.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 man/tokentap.yaml.5 $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 0644 man/tokentap-mock.1 man/tokentap-load.1 $(DESTDIR)$(MANDIR)/man1/
	sed 's|/usr/bin/tokentap|$(BINDIR)/tokentap|g' systemd/tokentap.service \
	    > $(DESTDIR)$(UNITDIR)/tokentap.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/tokentap.service
	$(INSTALL) -m 0644 systemd/tokentap.logrotate $(DESTDIR)$(SYSCONFDIR)/logrotate.d/tokentap
	@# an operator's config is never replaced; readable by the service's
	@# dynamic user, so secrets go in the environment (/etc/default/tokentap)
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/tokentap/tokentap.yaml ]; then \
	    echo "install: keeping $(DESTDIR)$(SYSCONFDIR)/tokentap/tokentap.yaml"; \
	else \
	    echo "$(INSTALL) -m 0644 $(INSTALL_CONF) $(DESTDIR)$(SYSCONFDIR)/tokentap/tokentap.yaml"; \
	    $(INSTALL) -m 0644 $(INSTALL_CONF) $(DESTDIR)$(SYSCONFDIR)/tokentap/tokentap.yaml; \
	fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tokentap $(DESTDIR)$(BINDIR)/tokentap-mock \
	    $(DESTDIR)$(BINDIR)/tokentap-load \
	    $(DESTDIR)$(MANDIR)/man8/tokentap.8 $(DESTDIR)$(MANDIR)/man5/tokentap.yaml.5 \
	    $(DESTDIR)$(MANDIR)/man1/tokentap-mock.1 $(DESTDIR)$(MANDIR)/man1/tokentap-load.1 \
	    $(DESTDIR)$(UNITDIR)/tokentap.service $(DESTDIR)$(SYSCONFDIR)/logrotate.d/tokentap
	@echo "uninstall: $(DESTDIR)$(SYSCONFDIR)/tokentap is left in place"

# Minutes: bootstraps a Debian base image once, builds the image with
# podman and runs it from a chroot. Not part of `make test`.
test-docker:
	@sh tests/docker/run.sh

# Minutes (the first run downloads every package): the README's two commands
# in a chroot of a fresh minbase bookworm with a clone of HEAD. As root.
test-fresh:
	@sh tests/fresh/run.sh
