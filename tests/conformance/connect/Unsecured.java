// Kafka's default OAUTHBEARER login (OAuthBearerUnsecuredLoginCallbackHandler, kafka-clients)
// on JAAS options a request gives:  java -cp '<connect jars>/*' Unsecured.java < request.json
// request: [{"<option>": "<value>", ...}, ...]  (each: the options of one JAAS line)
// result:  [{"token": "<compact JWS>", "extensions": {...}} or {"error": "<message>"}, ...]
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.SaslExtensionsCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler;

public class Unsecured {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        ArrayNode out = json.createArrayNode();
        for (JsonNode request : json.readTree(System.in)) {
            Map<String, String> options = new LinkedHashMap<>();
            request.fields().forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
            ObjectNode answer = out.addObject();
            try {
                var handler = new OAuthBearerUnsecuredLoginCallbackHandler();
                handler.configure(Map.of(), OAuthBearerLoginModule.OAUTHBEARER_MECHANISM, List.of(
                    new AppConfigurationEntry(OAuthBearerLoginModule.class.getName(),
                        AppConfigurationEntry.LoginModuleControlFlag.REQUIRED, options)));
                var token = new OAuthBearerTokenCallback();
                var extensions = new SaslExtensionsCallback();
                handler.handle(new Callback[] {token, extensions});
                answer.put("token", token.token().value());
                ObjectNode ext = answer.putObject("extensions");
                extensions.extensions().map().forEach(ext::put);
            } catch (Exception e) {
                answer.put("error", String.valueOf(e.getMessage()));
            }
        }
        System.out.println(json.writeValueAsString(out));
    }
}
