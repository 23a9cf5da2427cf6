package org.snowflakeid.example;

import java.sql.SQLException;
import org.snowflakeid.routing.ShardRouter;
import org.snowflakeid.routing.ShardRoutingDataSource;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;

/**
 * An application on the cluster that routes by shard itself: Spring Data JPA over the routing
 * DataSource (one pool per node), posts kept in each shard's {@code posts} table
 * (router/examples/node.sql's template).
 */
@SpringBootApplication
public class PostsApplication {
    public static void main(String[] args) {
        SpringApplication.run(PostsApplication.class, args);
    }

    /** The application's DataSource: Spring Boot's JPA set-up takes it (and makes no other). */
    @Bean
    public ShardRoutingDataSource dataSource(@Value("${snowflake.router-url}") String routerUrl,
                                             @Value("${snowflake.user}") String user,
                                             @Value("${snowflake.password:}") String password) throws SQLException {
        return new ShardRoutingDataSource(routerUrl, user, password, pool -> pool.setMaximumPoolSize(8));
    }

    @Bean
    public ShardRouter shardRouter(ShardRoutingDataSource dataSource) {
        return new ShardRouter(dataSource);
    }
}
