// One download or upload through the proxy the JVM's system properties name
// (https.proxyHost/https.proxyPort, http.proxyHost/http.proxyPort, read by
// ProxySelector.getDefault()), with java.net.http.HttpClient, for
// tests/integration/clients_test.cc. Run as a single source file:
//
//   java -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 ... \
//        -Djavax.net.ssl.trustStore=ca.p12 Client.java get|put URL FILE
//
// Exit 0 on HTTP 200; "put" prints the response body.
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;

public class Client {
  public static void main(String[] args) throws Exception {
    String op = args[0];
    URI uri = URI.create(args[1]);
    Path file = Path.of(args[2]);
    HttpClient client = HttpClient.newBuilder()
                            .proxy(ProxySelector.getDefault())
                            .connectTimeout(Duration.ofSeconds(30))
                            .build();
    HttpRequest.Builder req = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(60));
    int status;
    if (op.equals("get")) {
      HttpResponse<Path> r = client.send(req.GET().build(), HttpResponse.BodyHandlers.ofFile(file));
      status = r.statusCode();
    } else {
      HttpResponse<String> r =
          client.send(req.PUT(HttpRequest.BodyPublishers.ofFile(file)).build(),
                      HttpResponse.BodyHandlers.ofString());
      status = r.statusCode();
      System.out.print(r.body());
    }
    if (status != 200) {
      System.err.println("HTTP " + status);
      System.exit(1);
    }
  }
}
