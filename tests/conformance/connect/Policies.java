// Runs connector client overrides through Kafka Connect's own override policies and prints what
// each refuses:  java -cp '<connect jars>/*' Policies.java < request.json
// request: {"policies": ["None", ...], "keys": ["max.poll.records", ...]}
// result:  {"<policy>": {"<key>": ["<error message>", ...]}, ...}
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigRequest;
import org.apache.kafka.connect.health.ConnectorType;
import org.apache.kafka.connect.sink.SinkConnector;

public class Policies {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        JsonNode request = json.readTree(System.in);
        Map<String, Object> props = new LinkedHashMap<>();
        for (JsonNode key : request.get("keys")) props.put(key.asText(), "x");
        ObjectNode out = json.createObjectNode();
        for (JsonNode name : request.get("policies")) {
            String cls = "org.apache.kafka.connect.connector.policy." + name.asText() + "ConnectorClientConfigOverridePolicy";
            var policy = (ConnectorClientConfigOverridePolicy) Class.forName(cls).getDeclaredConstructor().newInstance();
            policy.configure(Map.of());
            var req = new ConnectorClientConfigRequest("c", ConnectorType.SINK, SinkConnector.class, props,
                ConnectorClientConfigRequest.ClientType.CONSUMER);
            ObjectNode refused = out.putObject(name.asText());
            for (var value : policy.validate(req)) {
                var errors = refused.putArray(value.name());
                value.errorMessages().forEach(errors::add);
            }
        }
        System.out.println(json.writeValueAsString(out));
    }
}
