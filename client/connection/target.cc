#include "client/connection/target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <QRegularExpression>

namespace attnscope::dashboard {
namespace {

struct HostPort {
  QString host;  // without brackets
  int port = 0;
};

// "host:port" or "[v6]:port" with a port in 1..65535.
bool parseHostPort(const QString& text, HostPort* out) {
  static const QRegularExpression kPattern(
      QStringLiteral(R"(^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):(\d{1,5})$)"));
  const QRegularExpressionMatch match = kPattern.match(text);
  if (!match.hasMatch()) return false;
  const int port = match.captured(3).toInt();
  if (port < 1 || port > 65535) return false;
  out->host = match.captured(1).isEmpty() ? match.captured(2) : match.captured(1);
  out->port = port;
  return true;
}

bool isAddress(int family, const QString& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(family, host.toLatin1().constData(), buffer) == 1;
}

QString label(int family, const QString& host, int port) {
  return family == AF_INET6 ? QStringLiteral("[%1]:%2").arg(host).arg(port)
                            : QStringLiteral("%1:%2").arg(host).arg(port);
}

Replica replicaAt(int family, const QString& host, int port) {
  const QString where = label(family, host, port);
  return {where, (family == AF_INET6 ? QStringLiteral("ipv6:") : QStringLiteral("ipv4:")) + where};
}

void addUnique(const Replica& replica, QList<Replica>* replicas) {
  if (!replicas->contains(replica)) replicas->append(replica);
}

// "ipv4:a:p,b:p" or "ipv6:[a]:p,...": the addresses after the scheme.
ResolvedTarget parseList(const QString& target, int family) {
  ResolvedTarget result;
  const QString scheme = family == AF_INET6 ? QStringLiteral("ipv6") : QStringLiteral("ipv4");
  const QStringList parts = target.mid(scheme.size() + 1).split(QLatin1Char(','));
  for (int i = 0; i < parts.size(); ++i) {
    HostPort hp;
    const QString part = parts[i].trimmed();
    const bool bracketed = part.startsWith(QLatin1Char('['));
    if (!parseHostPort(part, &hp) || bracketed != (family == AF_INET6) ||
        !isAddress(family, hp.host)) {
      result.error = QStringLiteral("'%1': address %2 ('%3') is not %4 (port 1..65535)")
                         .arg(target)
                         .arg(i + 1)
                         .arg(part, family == AF_INET6 ? QStringLiteral("[IPV6]:PORT")
                                                       : QStringLiteral("A.B.C.D:PORT"));
      result.replicas.clear();
      return result;
    }
    addUnique(replicaAt(family, hp.host, hp.port), &result.replicas);
  }
  return result;
}

// The host:port part of a dns: target ("dns:h:p", "dns:///h:p", "dns://auth/h:p").
QString dnsEndpoint(const QString& target) {
  QString rest = target.mid(4);
  if (rest.startsWith(QLatin1String("//"))) {
    const int slash = rest.indexOf(QLatin1Char('/'), 2);
    rest = slash < 0 ? QString() : rest.mid(slash + 1);
  }
  return rest;
}

ResolvedTarget lookUp(const QString& target, const HostPort& hp) {
  ResolvedTarget result;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const QByteArray host = hp.host.toUtf8();
  const QByteArray port = QByteArray::number(hp.port);
  const int rc = getaddrinfo(host.constData(), port.constData(), &hints, &found);
  if (rc != 0) {
    result.error = QStringLiteral("'%1': cannot resolve '%2': %3")
                       .arg(target, hp.host, QString::fromLocal8Bit(gai_strerror(rc)));
    return result;
  }
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* address = a->ai_family == AF_INET6
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
        inet_ntop(a->ai_family, address, text, sizeof text) == nullptr) {
      continue;
    }
    addUnique(replicaAt(a->ai_family, QString::fromLatin1(text), hp.port), &result.replicas);
  }
  freeaddrinfo(found);
  if (result.replicas.isEmpty()) {
    result.error = QStringLiteral("'%1': '%2' has no IPv4 or IPv6 address").arg(target, hp.host);
  }
  return result;
}

}  // namespace

QString checkTarget(const QString& raw) {
  const QString target = raw.trimmed();
  HostPort hp;
  if (target.startsWith(QLatin1String("ipv4:")) || target.startsWith(QLatin1String("ipv6:"))) {
    return parseList(target, target.startsWith(QLatin1String("ipv6:")) ? AF_INET6 : AF_INET).error;
  }
  if (target.startsWith(QLatin1String("dns:"))) {
    if (parseHostPort(dnsEndpoint(target), &hp)) return QString();
    return QStringLiteral("'%1': expected dns:///HOST:PORT (port 1..65535)").arg(target);
  }
  if (target.startsWith(QLatin1String("unix:")) || target.startsWith(QLatin1String("unix-abstract:"))) {
    if (target.section(QLatin1Char(':'), 1).isEmpty()) {
      return QStringLiteral("'%1': the socket path is empty").arg(target);
    }
    return QString();
  }
  if (parseHostPort(target, &hp)) return QString();
  return QStringLiteral(
             "'%1' is not HOST:PORT (port 1..65535) or a gRPC target: dns:///HOST:PORT, "
             "ipv4:ADDR:PORT,ADDR:PORT,..., ipv6:[ADDR]:PORT,...")
      .arg(target);
}

bool targetNeedsLookup(const QString& target) {
  return target.trimmed().startsWith(QLatin1String("dns:"));
}

ResolvedTarget resolveTarget(const QString& raw) {
  const QString target = raw.trimmed();
  ResolvedTarget result;
  result.error = checkTarget(target);
  if (!result.error.isEmpty()) return result;
  if (target.startsWith(QLatin1String("ipv4:")) || target.startsWith(QLatin1String("ipv6:"))) {
    return parseList(target, target.startsWith(QLatin1String("ipv6:")) ? AF_INET6 : AF_INET);
  }
  if (targetNeedsLookup(target)) {
    HostPort hp;
    parseHostPort(dnsEndpoint(target), &hp);
    return lookUp(target, hp);
  }
  result.replicas.append({target, target});
  return result;
}

}  // namespace attnscope::dashboard
