// Kafka's metrics library (kafka-clients) as Connect's task metrics use it, on a clock the
// request sets: Rate, Avg and Max of one sensor, Connect's defaults (2 samples of 30 s).
// Reads lines "record <ms> <value>" and "read <ms>"; for each read prints
// "<rate> <avg> <max>" (Java's Double.toString, NaN for none).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.List;
import java.util.function.Supplier;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Avg;
import org.apache.kafka.common.metrics.stats.Max;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.utils.Time;

public class Stats {
    static long now = 0;

    public static void main(String[] args) throws Exception {
        Time clock = new Time() {
            public long milliseconds() { return now; }
            public long nanoseconds() { return now * 1_000_000L; }
            public void sleep(long ms) { now += ms; }
            public void waitObject(Object o, Supplier<Boolean> done, long deadline) { }
        };
        Metrics metrics = new Metrics(new MetricConfig(), List.of(), clock);
        Sensor sensor = metrics.sensor("s");
        MetricName rate = metrics.metricName("rate", "g");
        MetricName avg = metrics.metricName("avg", "g");
        MetricName max = metrics.metricName("max", "g");
        sensor.add(rate, new Rate());
        sensor.add(avg, new Avg());
        sensor.add(max, new Max());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] p = line.trim().split(" ");
            if (p.length < 2) continue;
            now = Long.parseLong(p[1]);
            if (p[0].equals("record")) {
                sensor.record(Double.parseDouble(p[2]), now);
            } else {
                out.append(metrics.metric(rate).metricValue()).append(' ')
                   .append(metrics.metric(avg).metricValue()).append(' ')
                   .append(metrics.metric(max).metricValue()).append('\n');
            }
        }
        System.out.print(out);
        metrics.close();
    }
}
