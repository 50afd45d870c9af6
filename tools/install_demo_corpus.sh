#!/usr/bin/env bash
# install_demo_corpus.sh — fetch the zh_CN gettext catalogues of a chosen list of Debian packages, as
# training text for the bundled demo model (issue 7; tools/demo_data.py reads them).
#
#   tools/install_demo_corpus.sh [OUT]            # default OUT=/work/demo-data
#   tools/install_demo_corpus.sh --system         # apt-get install the same list instead (root; pulls deps)
#   tools/install_demo_corpus.sh --list           # print the package list and exit
#
# Default mode changes nothing on the system: each package's .deb is fetched with `apt-get download` (the
# package alone, no dependencies), and only its zh_CN / zh-CN LC_MESSAGES/*.mo files and its
# usr/share/doc/PKG/copyright are unpacked into OUT/pkgroot/PKG/ (plus PKG/.version); the .deb is then
# deleted (KEEP_DEBS=1 keeps them in OUT/debs).  That is ~430 MB of downloads and ~100 MB on disk, instead
# of the ~2 GB a real installation of these applications and their dependencies would take, and it cannot
# upgrade a library that other work on this machine links against.  OUT/pkgroot/MANIFEST.tsv records every
# package: version, .deb sha256, catalogues found.  Packages already unpacked at the candidate version are
# skipped, so a rerun only fetches what is new.  Needs `apt-get update` to have run (it is run if the
# package lists are missing).
#
# The list: large, well-translated free-software projects with Simplified Chinese catalogues — GNOME, Xfce,
# MATE and LXDE applications and libraries, KDE applications (Krita, Kdenlive, digiKam, Dolphin, Konsole),
# GIMP, Inkscape, LibreOffice, VLC, GnuCash, Gnumeric, Gramps, LyX, darktable, Evolution, Pidgin, FileZilla,
# GCC, util-linux, e2fsprogs, parted, grub, aptitude, R, Subversion, Mercurial, Blender, Cinnamon, WordPress
# and more.  Left out: games with long narrative text (wesnoth, warzone2100, freeciv) and data catalogues that
# are not interface text (star, mineral, element and place names: kstars-data, marble-data, kalzium-data,
# kgeography-data).  Packages already installed on the machine are read from the system by demo_data.py.
# Every package listed ships at least one Simplified Chinese catalogue, except transmission-common and tasksel,
# fetched only for the copyright file their sibling packages' doc folders link to.
set -euo pipefail

PACKAGES=(
  # GNU/Linux system tools and libraries
  util-linux-locales e2fsprogs-l10n libparted-i18n grub-common cryptsetup-bin sudo debconf-i18n
  aptitude-common tasksel-data apt-listchanges gcc-12-locales bison texinfo gawk
  cpio wdiff indent libgpg-error-l10n recode aspell dialog sysstat nano vim-runtime
  mc-data fish-common subversion mercurial-common r-base-core flatpak fwupd udisks2 accountsservice
  policykit-1-gnome pulseaudio pavucontrol network-manager
  system-config-printer-common
  # GTK / GNOME
  libgtk-3-common libgtk-4-common libgtksourceview-4-common libgtksourceview-5-common libvte-2.91-common
  libhandy-1-0 libadwaita-1-0 libsecret-common gcr gnome-keyring gvfs-common gnome-desktop3-data
  libgweather-4-common gnome-settings-daemon-common gnome-session-common gnome-shell-common mutter-common gdm3
  gnome-control-center-data nautilus-data gedit-common evince-common eog file-roller baobab gnome-terminal-data
  gnome-calculator gnome-disk-utility gnome-system-monitor gnome-maps gnome-weather gnome-clocks gnome-contacts
  gnome-calendar gnome-builder gnome-software-common gnome-bluetooth-3-common
  gnome-user-share gnome-music gnome-tweaks gnome-font-viewer gnome-characters gnome-logs
  gnome-boxes network-manager-gnome seahorse deja-dup brasero-common cheese-common yelp zenity-common
  devhelp-common gitg epiphany-browser-data geary polari dconf-editor gucharmap simple-scan orca gtranslator
  evolution-common evolution-data-server-common totem-common rhythmbox-data shotwell-common
  gthumb-data tracker tracker-extract gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad aisleriot gnome-mines gnome-sudoku gnome-chess gnome-mahjongg gnome-robots
  quadrapassel iagno lightsoff swell-foop tali five-or-more four-in-a-row gnome-klotski gnome-nibbles
  gnome-taquin gnome-tetravex hitori
  # Xfce
  xfce4-panel xfce4-settings xfwm4 xfce4-session xfdesktop4-data xfce4-terminal thunar-data mousepad ristretto
  parole xfce4-power-manager-data xfce4-notifyd xfce4-appfinder xfce4-screenshooter xfce4-taskmanager xfburn
  catfish xfce4-whiskermenu-plugin
  # MATE, LXDE
  mate-desktop-common caja-common pluma-common mate-panel-common atril-common
  engrampa-common mate-terminal-common mate-power-manager-common mate-settings-daemon-common marco-common
  eom-common mate-utils-common mate-system-monitor-common mate-applets-common mozo caja-extensions-common
  mate-media-common mate-screensaver-common mate-notification-daemon-common mate-polkit-common
  mate-sensors-applet-common pluma-plugins-common lxpanel-data pcmanfm libfm-data lxappearance lxterminal
  # more GNOME / GTK, Cinnamon
  gnome-sound-recorder gnome-screenshot gnome-power-manager gnome-color-manager gnome-photos sysprof
  gnome-connections gnome-initial-setup gnome-remote-desktop gnome-panel-data metacity-common
  gnome-shell-extensions evolution-ews lightdm-gtk-greeter slick-greeter cinnamon-l10n
  synaptic gdebi-core gnome-commander-data geeqie-common hugin-data homebank-data grisbi-common libgegl-common
  gtkhash virt-viewer transmission-gtk
  # more Xfce
  libxfce4ui-common libxfce4util-common thunar-archive-plugin thunar-media-tags-plugin
  xfce4-weather-plugin xfce4-pulseaudio-plugin xfce4-sensors-plugin xfce4-xkb-plugin
  xfce4-places-plugin xfce4-battery-plugin xfce4-cpugraph-plugin xfce4-netload-plugin xfce4-systemload-plugin
  xfce4-mount-plugin xfce4-dict xfce4-genmon-plugin xfce4-timer-plugin xfce4-verve-plugin
  # KDE applications and libraries (Debian ships KDE translations inside the application packages or in
  # separate -l10n packages)
  krita-l10n kdenlive-data digikam-data dolphin dolphin-plugins konsole
  kdevelop-l10n k3b-i18n kile-l10n libktorrent-l10n ktorrent-data
  libokteta-l10n okular konqueror ark gwenview kcalc filelight kdeconnect
  partitionmanager elisa juk dragonplayer kmplot skrooge-common kmymoney-common kmail korganizer
  akregator kdepim-runtime plasma-desktop-data plasma-workspace-data
  systemsettings calligra-data ktouch-data kig cantor
  # libraries and tools with -l10n / -i18n packages
  libvirt-l10n gutenprint-locales cflow-l10n libgphoto2-l10n rpm-i18n
  sylpheed-i18n wx3.2-i18n xfe-i18n aegisub-l10n
  # large applications
  gimp-data inkscape libreoffice-l10n-zh-cn vlc-l10n gnucash-common gnumeric-common gramps lyx-common
  darktable pspp audacity-data pidgin-data hexchat-common filezilla-common
  transmission-common tasksel poedit-common meld gparted-common geany-common bluefish-data
  blueman gajim zim gpodder lollypop blender-data
)

mode=unpack
out=/work/demo-data
for a in "$@"; do
  case "$a" in
    --system) mode=system ;;
    --list) printf '%s\n' "${PACKAGES[@]}"; exit 0 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "install_demo_corpus.sh: unknown option $a" >&2; exit 2 ;;
    *) out=$a ;;
  esac
done

if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  apt-get update
fi

# only packages the archive knows (apt-cache reads the local lists; nothing is queried remotely)
declare -A cand=()
while read -r p v; do cand[$p]=$v; done < <(apt-cache policy "${PACKAGES[@]}" 2>/dev/null |
  awk '/^[^ ].*:$/ {p = substr($1, 1, length($1) - 1)} /^  Candidate:/ {print p, $2}')
avail=()
declare -A dup=()
for p in "${PACKAGES[@]}"; do
  [ -z "${dup[$p]:-}" ] || continue
  dup[$p]=1
  if [ -n "${cand[$p]:-}" ] && [ "${cand[$p]}" != "(none)" ]; then avail+=("$p"); else echo "not in the archive: $p" >&2; fi
done

if [ "$mode" = system ]; then
  exec apt-get install -y --no-install-recommends "${avail[@]}"
fi

root=$out/pkgroot
debs=$out/debs
mkdir -p "$root" "$debs"
manifest=$root/MANIFEST.tsv
[ -f "$manifest" ] || printf 'package\tversion\tdeb_sha256\tdeb_bytes\tcatalogues\n' > "$manifest"

todo=()
for p in "${avail[@]}"; do
  v=${cand[$p]}
  if [ -f "$root/$p/.version" ] && [ "$(cat "$root/$p/.version")" = "$v" ]; then continue; fi
  todo+=("$p")
done
echo "install_demo_corpus: ${#avail[@]} packages in the list, ${#todo[@]} to fetch" >&2

n=0
for p in "${todo[@]}"; do
  n=$((n + 1))
  (cd "$debs" && apt-get download -q "$p" >/dev/null 2>&1) || { echo "download failed: $p" >&2; continue; }
  deb=$(ls -t "$debs"/"${p}"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { echo "no .deb for $p" >&2; continue; }
  v=$(dpkg-deb -f "$deb" Version)
  rm -rf "${root:?}/$p"
  mkdir -p "$root/$p"
  members=$(dpkg-deb -c "$deb" | awk '{print $NF}' |
            grep -E '/(zh_CN[^/]*|zh-CN|zh_Hans|zh_HANS|zh-Hans)/LC_MESSAGES/[^/]+\.mo$|^\./usr/share/doc/[^/]+/copyright$' || true)
  if [ -n "$members" ]; then
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root/$p" -T <(printf '%s\n' "$members")
  fi
  cats=$(printf '%s\n' "$members" | grep -c '\.mo$' || true)
  # usr/share/doc/PKG may be a symlink to a sibling package's folder (Debian policy 12.5): record the
  # sibling, whose copyright file tools/demo_data.py then reads (from OUT/pkgroot or the system)
  doclink=$(dpkg-deb -c "$deb" | awk -v d="./usr/share/doc/$p" '$(NF-2) == d && $(NF-1) == "->" {print $NF}')
  [ -z "$doclink" ] || basename "$doclink" > "$root/$p/.doclink"
  printf '%s\n' "$v" > "$root/$p/.version"
  printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$v" "$(sha256sum "$deb" | cut -d' ' -f1)" "$(stat -c %s "$deb")" "$cats" >> "$manifest"
  printf '[%d/%d] %-36s %-28s %3d catalogues\n' "$n" "${#todo[@]}" "$p" "$v" "$cats" >&2
  [ "${KEEP_DEBS:-0}" = 1 ] || rm -f "$deb"
done
echo "install_demo_corpus: done; $(find "$root" -name '*.mo' | wc -l) catalogues under $root ($(du -sh "$root" | cut -f1))" >&2
